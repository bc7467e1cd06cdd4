"""Run the course's recorded experiments at full strength and write their records.

    ./course experiments                 # every experiment (see the README for how long)
    ./course experiments luong_scores    # one or more by name
    ./course experiments --list          # names, arms, seeds, chapters
    ./course experiments luong_scores --seeds 0 1 2   # fewer seeds, for a quick look (not for a chapter)
    ./course experiments luong_scores --jobs 2        # two runs at a time, on a 2-core machine
    ./course experiments luong_scores --add           # only the seeds the record lacks

Each record goes to code/attnbook/records/NAME.json (attnbook.records). Re-execute the
chapter that reads it afterwards (./course execute CHAPTER), and commit both.
"""

import argparse
import sys

from attnbook import experiments  # noqa: F401  (registers the experiments)
from attnbook.records import EXPERIMENTS, extend, record, record_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument("--seeds", type=int, nargs="+", help="run only these seeds")
    parser.add_argument(
        "--add",
        action="store_true",
        help="run only the seeds the stored record lacks and add them (after it replays exactly)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="worker processes, one thread each (the numbers do not change)"
    )
    args = parser.parse_args()
    if args.list:
        for experiment in EXPERIMENTS.values():
            print(
                f"{experiment.name}: {len(experiment.arms)} arms x {len(experiment.seeds)} seeds, "
                f"{experiment.settings}; read by {experiment.chapter}\n  {experiment.description}"
            )
        return
    unknown = [name for name in args.names if name not in EXPERIMENTS]
    if unknown:
        sys.exit(f"unknown experiment(s) {', '.join(unknown)}; the experiments are {', '.join(EXPERIMENTS)}")
    for name in args.names or list(EXPERIMENTS):
        if args.add:
            result = extend(name, jobs=args.jobs)
        else:
            result = record(name, seeds=tuple(args.seeds) if args.seeds else None, jobs=args.jobs)
        print(f"{name}: {result.data['wall_seconds']:.0f} s -> {record_path(name)}")


if __name__ == "__main__":
    main()
