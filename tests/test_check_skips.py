"""tests/check_skips.py on JUnit reports of real pytest runs: allowed skips pass, any other fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import check_skips

_TESTS = '''
import pytest

@pytest.mark.skipif(True, reason="root reads a chmod 000 file anyway: permission denial cannot happen")
def test_as_root(): pass

def test_runs(): assert True

def test_{extra}():
    {body}
'''


def _report(tmp_path: Path, extra: str, body: str) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "test_sample.py").write_text(_TESTS.format(extra=extra, body=body))
    xml = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                    "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, capture_output=True, timeout=120)
    return xml


def test_allowed_skips_pass_and_others_fail(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    ok = _report(tmp_path / "ok", "plain", "assert True")
    assert check_skips.main([str(ok)]) == 0
    assert "1 skipped, all allowed" in capsys.readouterr().out
    # a skip for a missing file (not a machine capability) fails the step, naming the test and the reason
    bad = _report(tmp_path / "bad", "data", 'pytest.skip("../shared/traces absent")')
    assert check_skips.main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert "test_sample::test_data: skipped (../shared/traces absent)" in err


def test_more_skips_than_allowed_fail(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    xml = _report(tmp_path, "also_root",
                  'pytest.skip("root reads a chmod 000 file anyway: permission denial cannot happen")')
    allowed = check_skips.allowance()
    assert check_skips.verdict(check_skips.skipped([xml]), allowed) == []  # 2 allowed
    one = [(n - 1, c, r) for n, c, r in allowed]
    assert check_skips.verdict(check_skips.skipped([xml]), one) == [
        "2 tests skipped for 'root reads a chmod 000 file anyway' (a non-root user (CI runs as root)); 1 allowed"]
    assert check_skips.main([]) == 2 and check_skips.main([str(tmp_path / "missing.xml")]) == 2


def test_one_test_skipped_in_every_report_counts_once(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """CI writes a report per Python (main, py312, py313): the same allowed skip in each is still one test."""
    xml = _report(tmp_path, "also_root",
                  'pytest.skip("root reads a chmod 000 file anyway: permission denial cannot happen")')
    copies = []
    for name in ("main", "py312", "py313"):
        copy = tmp_path / f"{name}.xml"
        copy.write_bytes(xml.read_bytes())
        copies.append(str(copy))
    assert check_skips.main(copies) == 0
    assert "6 skipped, all allowed" in capsys.readouterr().out
