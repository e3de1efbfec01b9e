"""Checks core/compare/report_page.py, the page `duet compare --report DIR`
writes: on a copy of tests/data/compare_sample.json (baseline, a variant with
a small KL divergence, a failed variant) report.html must exist, hold exactly
the three chart images (ids chart-throughput, chart-memory, chart-pareto,
with alt text) as PNG data URIs that decode to PNGs wider and taller than 100
pixels, show the failed variant's reason, escape the continuations, and name
no http(s) URL. The edge cases (only the baseline; every variant but the
baseline failed; fidelity null for a variant; an interrupted run) must give
the same three charts. A missing compare.json, one that is not JSON and one
without a variants list must exit non-zero with one line on stderr.

Runs in the venv of scripts/python-env.sh (it needs matplotlib).
usage: report_page_test.py SOURCE_DIR WORK_DIR
"""
import base64
import copy
import html
import json
import pathlib
import re
import shutil
import struct
import subprocess
import sys

CHART_IDS = ["chart-throughput", "chart-memory", "chart-pareto"]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print(f"FAIL: {message}", file=sys.stderr)
    return condition


def run_report(script, directory):
    return subprocess.run([sys.executable, str(script), str(directory)],
                          capture_output=True, text=True, timeout=300)


def png_size(data):
    """(width, height) from the IHDR chunk, or None when not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def check_page(case, page):
    images = re.findall(r"<img\b[^>]*>", page)
    check(len(images) == 3, f"{case}: {len(images)} <img> elements, expected 3")
    ids = []
    for tag in images:
        chart_id = re.search(r'\bid="([^"]*)"', tag)
        alt = re.search(r'\balt="([^"]*)"', tag)
        src = re.search(r'\bsrc="data:image/png;base64,([A-Za-z0-9+/=]+)"', tag)
        name = chart_id.group(1) if chart_id else "?"
        ids.append(name)
        check(alt is not None and alt.group(1).strip(), f"{case}: {name} has no alt text")
        if not check(src is not None, f"{case}: {name} is not a PNG data URI"):
            continue
        size = png_size(base64.b64decode(src.group(1), validate=True))
        if check(size is not None, f"{case}: {name} does not decode to a PNG"):
            check(size[0] > 100 and size[1] > 100, f"{case}: {name} is only {size[0]}x{size[1]}")
    check(ids == CHART_IDS, f"{case}: chart ids {ids}, expected {CHART_IDS}")
    urls = re.findall(r"https?://\S{0,40}", page, flags=re.IGNORECASE)
    check(not urls, f"{case}: the page references {urls[:3]}")
    check(not re.search(r"<(link|iframe)\b|@import|url\(", page, flags=re.IGNORECASE),
          f"{case}: the page loads an external resource")


def main():
    source, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    script = source / "core/compare/report_page.py"
    sample = json.loads((source / "tests/data/compare_sample.json").read_text(encoding="utf-8"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)

    # The sample as `duet compare` writes it.
    directory = work / "sample"
    directory.mkdir()
    shutil.copy(source / "tests/data/compare_sample.json", directory / "compare.json")
    result = run_report(script, directory)
    check(result.returncode == 0, f"sample: exit {result.returncode}: {result.stderr.strip()}")
    report = directory / "report.html"
    if check(report.is_file(), "sample: report.html was not written"):
        page = report.read_text(encoding="utf-8")
        check_page("sample", page)
        failed = [v for v in sample["variants"] if v["status"] == "failed"]
        check(len(failed) == 1, "sample: expected one failed variant")
        for variant in failed:
            reason = html.escape(variant["failure"]["reason"])
            check(reason in page, f"sample: the reason of {variant['name']} is missing")
        for variant in sample["variants"]:
            check(html.escape(variant["name"]) in page, f"sample: {variant['name']} is missing")
        check("a &lt; b &amp; b &gt; a" in page, "sample: a continuation is not HTML-escaped")
        check("a < b & b > a" not in page, "sample: a continuation went in unescaped")
        check(not (directory / "report.html.tmp").exists(), "sample: the temporary file remains")

    # Edge cases: each must still give a page with the three charts.
    base = sample["variants"][0]
    cases = {}
    only = copy.deepcopy(sample)
    only["variants"] = [copy.deepcopy(base)]
    cases["only-baseline"] = only
    all_failed = copy.deepcopy(sample)
    for variant in all_failed["variants"][1:]:
        variant.update(status="failed", speed=[], fidelity=None, greedy=[], peak_rss_bytes=None,
                       failure={"step": "load", "exit_code": 4, "reason": "cannot load"})
    cases["all-failed-but-baseline"] = all_failed
    no_fidelity = copy.deepcopy(sample)
    no_fidelity["variants"][1]["fidelity"] = None
    cases["fidelity-null"] = no_fidelity
    none_at_all = copy.deepcopy(sample)
    for variant in none_at_all["variants"]:
        variant["fidelity"] = None
    cases["fidelity-null-everywhere"] = none_at_all
    interrupted = copy.deepcopy(sample)
    interrupted["interrupted"] = True
    interrupted["variants"][1].update(status="interrupted", fidelity=None, greedy=[])
    cases["interrupted"] = interrupted
    baseline_failed = copy.deepcopy(sample)
    baseline_failed["variants"][0].update(
        status="failed", speed=[], fidelity=None, greedy=[],
        failure={"step": "speed", "exit_code": 3, "reason": "baseline broke"})
    cases["baseline-failed"] = baseline_failed
    for case, data in cases.items():
        directory = work / case
        directory.mkdir()
        (directory / "compare.json").write_text(json.dumps(data), encoding="utf-8")
        result = run_report(script, directory)
        if check(result.returncode == 0, f"{case}: exit {result.returncode}: {result.stderr.strip()}"):
            check_page(case, (directory / "report.html").read_text(encoding="utf-8"))

    # Bad input: a non-zero exit with one line on stderr, and no page.
    bad = {"missing": None, "not-json": "{ this is not json", "no-variants": '{"baseline": "x"}',
           "variant-without-name": '{"variants": [{"status": "ok"}]}'}
    for case, text in bad.items():
        directory = work / f"bad-{case}"
        directory.mkdir()
        if text is not None:
            (directory / "compare.json").write_text(text, encoding="utf-8")
        result = run_report(script, directory)
        lines = result.stderr.strip().splitlines()
        check(result.returncode != 0, f"bad {case}: exit 0")
        check(len(lines) == 1, f"bad {case}: stderr is {len(lines)} lines: {result.stderr!r}")
        check(not (directory / "report.html").exists(), f"bad {case}: report.html was written")
        print(f"bad {case}: exit {result.returncode}: {lines[0] if lines else ''}")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print(f"report_page: sample and {len(cases)} edge cases give the three charts; "
          f"{len(bad)} bad inputs exit non-zero")
    return 0


if __name__ == "__main__":
    sys.exit(main())
