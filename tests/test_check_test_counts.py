"""scripts/check_test_counts.py (make test-count): a collected test id is matched with the junit
report's (classname, name) as pytest's junitxml writes them, parameters holding `::` included."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location(
        "check_test_counts", ROOT / "scripts" / "check_test_counts.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_id_is_split_as_junitxml_splits_it():
    key = _script().junit_key
    assert key("tests/a/test_b.py::TestC::test_d[x]") == ("tests.a.test_b.TestC", "test_d[x]")
    assert key("tests/a/test_b.py::test_d") == ("tests.a.test_b", "test_d")
    # An IPv6 address in the parameters: `::` there is no separator.
    assert key("tests/core/test_ip.py::test_right[1-2001:db8::1]") == (
        "tests.core.test_ip",
        "test_right[1-2001:db8::1]",
    )


def test_a_test_that_ran_in_no_phase_fails_the_count(tmp_path):
    collected = tmp_path / "collected.txt"
    collected.write_text(
        "tests/a/test_b.py::test_c[::1]@stack-deploy-test_soak\ntests/a/test_b.py::test_d\n"
    )
    report = tmp_path / "phase.xml"
    report.write_text(
        '<testsuites><testsuite><testcase classname="tests.a.test_b"'
        ' name="test_c[::1]@stack-deploy-test_soak"/>'
        "</testsuite></testsuites>"
    )
    main = _script().main
    assert main([str(collected), str(report)]) == 1
    collected.write_text("tests/a/test_b.py::test_c[::1]@stack-deploy-test_soak\n")
    assert main([str(collected), str(report)]) == 0  # the group is no part of the test's name


def test_the_collection_list_holds_the_tests_that_m_left_out(tmp_path):
    """What the SQLite phase writes for the count: its whole collection, though `-m` runs none."""
    listed = tmp_path / "collected.txt"
    # Not as an xdist worker: this run's own PYTEST_XDIST_WORKER (gw2) would have it write none.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL"} and not k.startswith("PYTEST_")
    }
    servers = tmp_path / "servers-files.txt"
    subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "no_such_mark",
            f"--collected-list={listed}",
            f"--servers-files={servers}",
            "tests/test_check_test_counts.py",
            "tests/deploy/test_wait.py",
        ],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
    )
    ids = listed.read_text().splitlines()
    assert "tests/test_check_test_counts.py::test_an_id_is_split_as_junitxml_splits_it" in ids
    assert len([i for i in ids if i.startswith("tests/test_check_test_counts.py::")]) == 3
    assert any(i.startswith("tests/deploy/test_wait.py::") for i in ids)
    assert _script().collected(listed) == {_script().junit_key(i) for i in ids}
    # And the files the PostgreSQL/Redis phase collects: those with a test it runs, each once.
    assert servers.read_text().splitlines() == ["tests/deploy/test_wait.py"]
