"""The long fuzzing run: the properties of tests/test_fuzz*.py with thousands of cases instead of the
fast slice in `make test`.

    python bench/fuzz.py                  # 200 examples per property and device
    python bench/fuzz.py --examples 1000 -k "reduce or matmul"

Prints the cases run per property, the failures (each with the WEBGRAD_TEST_SEED that replays it)
and the time taken; exits 1 if any property failed.
"""
import argparse
import glob
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Tally:
    """A pytest plugin that keeps each test's outcome and the seed that reproduces a failure."""

    def __init__(self):
        self.failed = {}
        self.passed = []

    def pytest_runtest_logreport(self, report):
        if report.when != "call" and not report.failed:
            return
        if report.failed:
            seed = dict(report.user_properties).get("webgrad_seed")
            self.failed[report.nodeid] = seed
        elif report.when == "call":
            self.passed.append(report.nodeid)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="examples per property and device")
    parser.add_argument("-k", default=None, help="pytest -k expression selecting properties")
    args = parser.parse_args()

    os.environ["WEBGRAD_FUZZ_EXAMPLES"] = str(args.examples)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import pytest

    tally = Tally()
    options = sorted(glob.glob(os.path.join(ROOT, "tests", "test_fuzz*.py"))) + ["-q", "-p", "no:cacheprovider"]
    if args.k:
        options += ["-k", args.k]
    start = time.perf_counter()
    pytest.main(options, plugins=[tally])
    seconds = time.perf_counter() - start

    from fuzzing import CASES   # the module the files pytest ran share (tests/ is on sys.path)
    print(f"\n{'property':<24}{'cases':>8}")
    for name, count in sorted(CASES.items()):
        print(f"{name:<24}{count:>8}")
    total = sum(CASES.values())
    print(f"\n{total} cases in {seconds:.0f} s ({total / seconds:.0f} cases/s); "
          f"{len(tally.passed)} tests passed, {len(tally.failed)} failed")
    for nodeid, seed in tally.failed.items():
        print(f"FAILED {nodeid}  (replay: WEBGRAD_TEST_SEED={seed} WEBGRAD_FUZZ_EXAMPLES={args.examples} "
              f"pytest '{nodeid}')")
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
