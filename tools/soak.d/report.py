"""The soak report: results.json (everything), report.md, and report.html —
one page with inline CSS and the plots inlined as SVG data URIs, so it can
be mailed or attached to a CI run as a single file — and junit.xml, the
same runs as JUnit XML for a CI system to read (one testcase per run).

Two plots share the time axis: throughput, and the nodes the library holds
(in use or in limbo, from dq_pool_stats), which is flat on every target
when nothing leaks, emulated or not; resident memory under an emulator is
the emulator's, so the table shows it beside the library's own count."""

import base64
import datetime
import html
import json
import os
import re
import xml.etree.ElementTree as ET

import plots
import runner
from runner import FAILED, LOST, PASS, human

VERDICT_ORDER = {FAILED: 0, LOST: 1, PASS: 2}


def rows(records):
    """One row per (target, config), in the order first seen."""
    out, index = [], {}
    for r in records:
        key = (r["target"], r["config"])
        if key not in index:
            index[key] = len(out)
            out.append({"target": r["target"], "config": r["config"], "runs": []})
        out[index[key]]["runs"].append(r)
    for row in out:
        rs = row["runs"]
        row["n"] = len(rs)
        row["passed"] = sum(1 for r in rs if r["verdict"] == PASS)
        row["failed"] = sum(1 for r in rs if r["verdict"] == FAILED)
        row["lost"] = sum(1 for r in rs if r["verdict"] == LOST)
        row["hours"] = sum(r["hours"] or 0 for r in rs)
        row["ops"] = sum(r["ops"] or 0 for r in rs)
        row["violations"] = sum(r["violations"] or 0 for r in rs)
        peaks = [r["peak_rss_kb"] for r in rs if r["peak_rss_kb"]]
        row["peak_rss_kb"] = max(peaks) if peaks else None
        pool = [r.get("pool_reserved_kb") for r in rs if r.get("pool_reserved_kb")]
        row["pool_reserved_kb"] = max(pool) if pool else None
        row["atomics"] = sorted({(r["summary"] or {}).get("atomics") for r in rs} - {None})
        want = {r.get("expected_atomics") for r in rs} - {None}
        row["atomics_warning"] = ""
        if want and row["atomics"] and set(row["atomics"]) != want:
            row["atomics_warning"] = "expected %s" % ", ".join(sorted(want))
        row["verdict"] = FAILED if row["failed"] else LOST if row["lost"] else PASS
        row["seed"] = [r["seed"] for r in rs]
    return out


def mem(kb):
    if not kb:
        return "-"
    return "%.1f MiB" % (kb / 1024.0) if kb >= 1024 else "%d KiB" % kb


def atomics_text(row):
    text = ", ".join(row["atomics"]) or "-"
    return text + (" (WARNING: %s)" % row["atomics_warning"] if row["atomics_warning"] else "")


def atomics_html(row):
    text = html.escape(", ".join(row["atomics"]) or "-")
    if row["atomics_warning"]:
        text += " <span class='warn'>&#9888; %s</span>" % html.escape(row["atomics_warning"])
    return text


def verdict_text(row):
    if row["verdict"] == PASS:
        return PASS
    parts = []
    if row["failed"]:
        parts.append("%d failed" % row["failed"])
    if row["lost"]:
        parts.append("%d lost" % row["lost"])
    return "%s (%s)" % (row["verdict"], ", ".join(parts))


def progress_throughput(run_dir):
    """Throughput from the stderr progress lines, for a run without a JSON
    summary (crashed, killed, hung): shows how far it got and how fast."""
    pts, prev = [], None
    try:
        with open(os.path.join(run_dir, "stderr.log"), errors="replace") as f:
            for line in f:
                if not line.startswith("progress "):
                    continue
                p = runner.parse_progress(line)
                if "elapsed" in p and "ops" in p:
                    if prev and p["elapsed"] > prev["elapsed"]:
                        pts.append([p["elapsed"], (p["ops"] - prev["ops"]) /
                                    (p["elapsed"] - prev["elapsed"])])
                    elif not prev and p["elapsed"] > 0:
                        pts.append([p["elapsed"], p["ops"] / p["elapsed"]])
                    prev = p
    except OSError:
        pass
    return pts


def run_throughput(r):
    t = (r["summary"] or {}).get("throughput")
    return t if t else progress_throughput(r["run_dir"])


def progress_pool(run_dir):
    """Nodes held (in use + limbo) from the progress lines, for a run
    without a JSON summary."""
    pts = []
    try:
        with open(os.path.join(run_dir, "stderr.log"), errors="replace") as f:
            for line in f:
                if line.startswith("progress "):
                    p = runner.parse_progress(line)
                    if "elapsed" in p and "nodes_in_use" in p:
                        pts.append([p["elapsed"], p["nodes_in_use"] + p.get("nodes_limbo", 0)])
    except OSError:
        pass
    return pts


def run_pool(r):
    """[[elapsed, nodes in use + in limbo], ...]: the summary's pool
    samples are [elapsed, reserved KiB, in use, limbo, cached]."""
    p = (r["summary"] or {}).get("pool")
    if p:
        return [[s[0], s[2] + s[3]] for s in p if len(s) >= 4]
    return progress_pool(r["run_dir"])


def run_time_text(hours):
    """Run time in the unit that reads best: 20 s, 12.5 min, 3.25 h."""
    seconds = hours * 3600.0
    if seconds < 120:
        return "%.0f s" % seconds
    if seconds < 7200:
        return "%.1f min" % (seconds / 60.0)
    return "%.2f h" % hours


def seed_text(values):
    return ", ".join(str(s) for s in values) or "-"


def row_label(row):
    """The target, and its config where that says more (not "host host")."""
    if row["config"] == row["target"]:
        return row["target"]
    return "%s %s" % (row["target"], row["config"])


def series(table, per_run=run_throughput):
    out = []
    for row in table:
        samples = [per_run(r) for r in row["runs"]]
        out.append((row_label(row), plots.mean_series(samples)))
    return out


POOL_TITLE = "Library memory over time: nodes in use or in limbo (dq_pool_stats, log scale)"


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no %s)" % os.path.basename(path)


def write_all(out_dir, records, meta):
    table = rows(records)
    overall = PASS if all(r["verdict"] == PASS for r in records) and records else \
        (FAILED if any(r["verdict"] == FAILED for r in records) else LOST)
    meta = dict(meta, verdict=overall)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "runs": records}, f, indent=1)
    svg = plots.throughput_svg(series(table))
    with open(os.path.join(out_dir, "throughput.svg"), "w") as f:
        f.write(svg)
    pool_svg = plots.throughput_svg(series(table, run_pool), title=POOL_TITLE,
                                    empty="no pool samples")
    with open(os.path.join(out_dir, "pool.svg"), "w") as f:
        f.write(pool_svg)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(markdown(table, records, meta))
    with open(os.path.join(out_dir, "report.html"), "w") as f:
        f.write(html_page(table, records, meta, svg, pool_svg))
    with open(os.path.join(out_dir, "junit.xml"), "w", encoding="utf-8") as f:
        f.write(junit_xml(table, meta))
    return overall, table


def problems(records):
    return sorted([r for r in records if r["verdict"] != PASS],
                  key=lambda r: (VERDICT_ORDER[r["verdict"]], r["target"], r["config"], r["seed"]))


# What XML 1.0 cannot carry, escaped or not: control characters other than
# tab, newline and carriage return, lone surrogates, U+FFFE and U+FFFF. A
# stress binary's stderr may hold any of them.
XML_INVALID = re.compile(r"[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text):
    return XML_INVALID.sub("?", str(text))


def junit_xml(table, meta):
    """JUnit XML: a testsuite per (target, config) row, a testcase per run
    (named by its seed). A FAILED run carries a <failure> with its
    violations, a LOST run (or one without a verdict) an <error> with the
    last lines of its stderr, and every run its repro commands in
    <system-out>; so the counts are results.json's verdicts."""
    stamp = meta["started"].replace(" UTC", "").replace(" ", "T")
    root = ET.Element("testsuites", name="tools/soak")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for row in table:
        label = row_label(row)
        suite = ET.SubElement(root, "testsuite", name=xml_text(label), timestamp=stamp)
        counts = {"tests": 0, "failures": 0, "errors": 0}
        seconds = 0.0
        for r in row["runs"]:
            wall = r.get("wall_s") or 0.0
            seconds += wall
            case = ET.SubElement(suite, "testcase", classname=xml_text(label),
                                 name="seed %d" % r["seed"], time="%.3f" % wall)
            counts["tests"] += 1
            if r["verdict"] == FAILED:
                counts["failures"] += 1
                bad = ET.SubElement(case, "failure", type="violation",
                                    message=xml_text(r["reason"]))
                bad.text = xml_text("\n".join(r["violation_lines"]) or r["reason"])
            elif r["verdict"] != PASS:
                counts["errors"] += 1
                bad = ET.SubElement(case, "error", type="lost",
                                    message=xml_text(r["reason"] or "no verdict"))
                bad.text = xml_text(tail(os.path.join(r["run_dir"], "stderr.log")))
            out = ["repro (launcher): %s" % r["launcher_repro"]]
            if r["direct_repro"]:
                out.append("repro (direct): %s" % r["direct_repro"])
            if r["binary_repro"]:
                out.append("repro (as printed by the binary): %s" % r["binary_repro"])
            out.append("logs: %s" % r["run_dir"])
            ET.SubElement(case, "system-out").text = xml_text("\n".join(out) + "\n")
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
        suite.set("skipped", "0")
        suite.set("time", "%.3f" % seconds)
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def markdown(table, records, meta):
    L = ["# Soak report: %s" % meta["verdict"], "",
         "- started %s, took %s; %d runs of %gs on %d target/config pairs, --jobs %d" %
         (meta["started"], meta["took"], len(records), meta["duration"], len(table),
          meta["jobs"]),
         "- stress flags: `%s`" % " ".join(meta["stress_flags"]),
         "- random seed of each run: %s" % seed_text(meta.get("seed", [])),
         "- command: `%s`" % meta["command"], "",
         "| target | config | atomics | runs | seed | run time | operations | violations | "
         "library memory | peak RSS | verdict |",
         "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in table:
        L.append("| %s | %s | %s | %d | %s | %s | %s | %d | %s | %s | **%s** |" %
                 (row["target"], row["config"], atomics_text(row), row["n"],
                  seed_text(row["seed"]), run_time_text(row["hours"]), human(row["ops"]),
                  row["violations"],
                  mem(row["pool_reserved_kb"]), mem(row["peak_rss_kb"]), verdict_text(row)))
    L += ["", "Library memory: the pool's peak reserved bytes (dq_pool_stats). Peak "
          "RSS: the process's, which under QEMU is the emulator's.", "",
          "![throughput over time](throughput.svg)", "",
          "![library memory over time](pool.svg)", ""]
    bad = problems(records)
    if bad:
        L += ["## Failed and lost runs", ""]
    for r in bad:
        L += ["### %s: %s %s, seed %d" % (r["verdict"], r["target"], r["config"], r["seed"]),
              "", "- reason: %s" % r["reason"],
              "- logs: `%s/` (stdout.log, stderr.log, run.json)" % rel(r["run_dir"], meta)]
        for v in r["violation_lines"][:5]:
            L.append("- `%s`" % v)
        L += ["- repro (launcher): `%s`" % r["launcher_repro"],
              "- repro (direct): `%s`" % r["direct_repro"]]
        if r["binary_repro"]:
            L.append("- repro (as printed by the binary): `%s`" % r["binary_repro"])
        # A fence the excerpt cannot close early: longer than any backtick run in it.
        excerpt = tail(os.path.join(r["run_dir"], "stderr.log")).rstrip("\n")
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall("`+", excerpt)), default=0))
        L += ["- last lines of stderr.log:", "", fence, excerpt, fence]
        L.append("")
    return "\n".join(L) + "\n"


def rel(path, meta):
    try:
        return os.path.relpath(path, meta["out_dir"])
    except ValueError:
        return path


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{margin:0 0 4px 0;font-size:24px} h2{font-size:18px;margin-top:28px}
.meta{color:#555;font-size:13px;margin:2px 0}
table{border-collapse:collapse;margin-top:14px;font-size:14px}
th,td{border:1px solid #ccc;padding:5px 10px;text-align:left}
th{background:#f0f0f0} td.n{text-align:right;font-variant-numeric:tabular-nums}
.PASS{background:#d9f2d9;color:#145214;font-weight:bold}
.FAILED{background:#f8d0d0;color:#8b0000;font-weight:bold}
.LOST{background:#fde7c2;color:#7a4a00;font-weight:bold}
.banner{display:inline-block;padding:3px 12px;border-radius:4px;margin-left:8px}
pre{background:#f6f6f6;border:1px solid #ddd;padding:8px;overflow-x:auto;font-size:12px;
white-space:pre-wrap;word-break:break-all}
.run{border-left:4px solid #ccc;padding-left:12px;margin:16px 0}
.run.FAILED{border-color:#c00;background:none;color:inherit;font-weight:normal}
.run.LOST{border-color:#e69500;background:none;color:inherit;font-weight:normal}
.warn{color:#a05a00;font-size:12px}
img.plot{border:1px solid #ddd;margin-top:14px;max-width:100%}
"""


def html_page(table, records, meta, svg, pool_svg):
    e = html.escape
    H = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
         "<title>Soak report: %s</title><style>%s</style></head><body>" % (meta["verdict"], CSS),
         "<h1>deliqueue soak report <span class='banner %s'>%s</span></h1>" %
         (meta["verdict"], meta["verdict"]),
         "<p class='meta'>started %s, took %s &middot; %d runs of %gs on %d target/config "
         "pairs &middot; --jobs %d &middot; random seed of each run: %s</p>" %
         (e(meta["started"]), e(meta["took"]), len(records), meta["duration"], len(table),
          meta["jobs"], e(seed_text(meta.get("seed", [])))),
         "<p class='meta'>stress flags: <code>%s</code></p>" % e(" ".join(meta["stress_flags"])),
         "<p class='meta'>command: <code>%s</code></p>" % e(meta["command"]),
         "<table><tr><th>target</th><th>config</th><th>atomics</th><th>runs</th>"
         "<th>seed</th><th>run time</th><th>operations</th><th>violations</th>"
         "<th title='the pool&#39;s peak reserved bytes (dq_pool_stats)'>library memory</th>"
         "<th title='under QEMU, the emulator&#39;s'>peak RSS</th><th>verdict</th></tr>"]
    for row in table:
        H.append("<tr><td>%s</td><td>%s</td><td>%s</td><td class='n'>%d</td><td>%s</td>"
                 "<td class='n'>%s</td><td class='n' title='%d'>%s</td><td class='n'>%d</td>"
                 "<td class='n'>%s</td><td class='n'>%s</td><td class='%s'>%s</td></tr>" %
                 (e(row["target"]), e(row["config"]), atomics_html(row),
                  row["n"], e(seed_text(row["seed"])), run_time_text(row["hours"]), row["ops"],
                  human(row["ops"]), row["violations"],
                  mem(row["pool_reserved_kb"]), mem(row["peak_rss_kb"]), row["verdict"],
                  e(verdict_text(row))))
    H.append("</table>")
    for alt, picture in (("throughput over time per target", svg),
                         ("library memory over time per target", pool_svg)):
        uri = "data:image/svg+xml;base64," + base64.b64encode(picture.encode()).decode()
        H.append("<br><img class='plot' alt='%s' src='%s'>" % (alt, uri))
    bad = problems(records)
    if bad:
        H.append("<h2>Failed and lost runs</h2>")
    for r in bad:
        H.append("<div class='run %s'><b>%s</b>: %s %s, seed %d<br>reason: %s<br>"
                 "logs: <code>%s/</code>" %
                 (r["verdict"], r["verdict"], e(r["target"]), e(r["config"]), r["seed"],
                  e(r["reason"]), e(rel(r["run_dir"], meta))))
        if r["violation_lines"]:
            H.append("<pre>%s</pre>" % e("\n".join(r["violation_lines"][:5])))
        H.append("<br>repro (launcher):<pre>%s</pre>repro (direct):<pre>%s</pre>" %
                 (e(r["launcher_repro"]), e(r["direct_repro"])))
        H.append("last lines of stderr.log:<pre>%s</pre></div>" %
                 e(tail(os.path.join(r["run_dir"], "stderr.log"))))
    H.append("<p class='meta'>generated %s by tools/soak; full data in results.json, "
             "per-run logs under runs/.</p></body></html>" %
             datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S UTC"))
    return "\n".join(H)
