"""DVC stage `params`: params.yaml was composed from conf/ as it is now, and every name its grid uses exists.

It depends on conf/, so editing conf/ without recomposing (`make repro` does) fails here with
what to run, instead of `dvc repro` reporting "up to date" over the old configuration.
"""

import argparse

from releval import paths
from releval.composition import check_composed
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conf", default=paths.CONF)
    parser.add_argument("--params", default=paths.PARAMS)
    args = parser.parse_args()
    check_composed(args.params, args.conf)
    print(f"params: {args.params} is composed from {args.conf}/ as it is now")


if __name__ == "__main__":
    entry(main)
