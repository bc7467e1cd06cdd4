"""Keep the browser console of every page clean (a Sphinx extension, listed in _config.yml).

Two things in the Jupyter Book 1 theme stack log an error on every page, before any course code runs:

- every page gets sphinx-thebe's configuration script (``const THEBE_JS_URL = ...``) twice, so the
  second ``const`` is a SyntaxError;
- pydata-sphinx-theme reads the colour mode from ``html_context["default_mode"]``, which Jupyter Book
  leaves empty, and reports the empty mode as invalid (set in _config.yml to "auto", its own default).

This removes repeated inline scripts, so the browser check can require a console without errors.
"""


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    """Keep the first copy of any script the page would load twice."""
    scripts = context.get("script_files", [])
    seen, unique = set(), []
    for script in scripts:
        # The copies differ only in how "no file" is written (None or ""): compare file and attributes.
        key = (str(getattr(script, "filename", script) or ""), tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", drop_repeated_scripts, priority=900)  # after the other extensions' handlers
    return {"parallel_read_safe": True, "parallel_write_safe": True}
