"""Proves that `make test` lost no test between its two phases.

    python scripts/check_test_counts.py COLLECTED REPORT.xml [REPORT.xml ...]

COLLECTED is the whole suite's collection, one test id a line (the SQLite phase's
`--collected-list`, tests/conftest.py; `pytest --collect-only -q` prints the same ids);
each REPORT is a phase's `--junitxml`. A test ran when a report has it neither skipped nor
deselected (passed or failed: a failure fails the phase itself). Prints the counts, and exits 1
when a collected test ran in no phase, naming the first of them.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

Key = tuple[str, str]


# The xdist groups of tests/conftest.py (`browser-1` and `browser-2`, and `stack-<module>` per
# served stack's module): `--dist loadgroup` adds `@group` to a grouped test's id.
GROUP = re.compile(r"@(?:browser-\d+|stack-[\w-]+)$")


def collected(path: Path) -> set[Key]:
    """The test ids of a collection list, as junit's (classname, name). Under xdist's
    `--dist loadgroup` a grouped test's id ends in its `@group`, as in the reports."""
    keys = set()
    for line in path.read_text().splitlines():
        line = line.strip()
        if "::" in line and not line.startswith(("=", "<")):
            keys.add(junit_key(GROUP.sub("", line)))
    return keys


def junit_key(node_id: str) -> Key:
    """`tests/a/test_b.py::TestC::test_d[x]` -> (`tests.a.test_b.TestC`, `test_d[x]`), as
    pytest's junitxml makes them: the parameters (which may hold `::`, an IPv6 address) are set
    aside before the id is split."""
    address, bracket, params = node_id.partition("[")
    path, *rest = address.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *rest[:-1]]), rest[-1] + bracket + params


def ran(report: Path) -> tuple[set[Key], int]:
    """The tests a junit report ran, and how many it skipped."""
    tree = ET.parse(report)  # noqa: S314 - our own pytest's report
    done, skipped = set(), 0
    for case in tree.iter("testcase"):
        if case.find("skipped") is not None:
            skipped += 1
            continue
        name = GROUP.sub("", case.get("name", ""))
        done.add((case.get("classname", ""), name))
    return done, skipped


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    expected = collected(Path(argv[0]))
    union: set[Key] = set()
    for name in argv[1:]:
        if not Path(name).is_file():
            print(f"{name}: no report (the phase did not run)")
            continue
        done, skipped = ran(Path(name))
        print(f"{name}: {len(done)} tests ran, {skipped} skipped")
        union |= done
    missing = sorted(expected - union)
    print(f"{len(expected)} tests collected, {len(union & expected)} ran in at least one phase")
    if not expected:
        print("no collected test: the collection failed")
        return 1
    if missing:
        print(f"{len(missing)} collected tests ran in no phase, for example:")
        for classname, name in missing[:20]:
            print(f"  {classname} :: {name}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
