"""Throughput-over-time plot as a standalone SVG (no gnuplot, no matplotlib),
so the HTML report can inline it as a data URI and stay self-contained.

The y axis is logarithmic: host and QEMU throughputs differ by an order of
magnitude or more, and on a linear axis the emulated targets would be a flat
line at zero."""

import math
from xml.sax.saxutils import escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def nice_step(span, want=8):
    raw = span / max(1, want)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def fmt_rate(v):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            x = v / div
            return ("%.0f%s" if x >= 10 or x == int(x) else "%.1f%s") % (x, unit)
    return "%.0f" % v


def fmt_time(s):
    if s >= 7200:
        return "%gh" % round(s / 3600, 1)
    if s >= 120:
        return "%gm" % round(s / 60, 1)
    return "%gs" % round(s, 1)


def throughput_svg(series, title="Throughput over time (ops/s, log scale)",
                   width=960, height=420, empty="no throughput samples"):
    """series: list of (label, [(elapsed_s, value), ...]) in legend order;
    value is ops/s for the throughput plot, a count for the others."""
    legend_w = 260
    left, right, top, bottom = 70, legend_w + 20, 36, 46
    pw, ph = width - left - right, height - top - bottom
    pts = [(t, v) for _, s in series for t, v in s if v and v > 0]
    if not pts:
        height = 90  # no samples (every run ended before its first interval)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">'
           % (width, height, width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>'
           % (left, escape(title))]
    if not pts:
        out.append('<text x="%d" y="%d" fill="#666">%s: every run ended '
                   'before its first progress interval</text>' % (left, 60, escape(empty)))
        out.append("</svg>")
        return "\n".join(out)
    tmax = max(t for t, _ in pts) or 1.0
    vmin, vmax = min(v for _, v in pts), max(v for _, v in pts)
    lo = 10 ** math.floor(math.log10(vmin))
    hi = 10 ** math.ceil(math.log10(vmax))
    if hi <= lo * 10 and vmax < hi:  # keep at least one decade visible
        hi = max(hi, lo * 10)
    llo, lhi = math.log10(lo), math.log10(hi)

    def X(t):
        return left + pw * (t / tmax)

    def Y(v):
        return top + ph * (1 - (math.log10(v) - llo) / (lhi - llo))

    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#999"/>'
               % (left, top, pw, ph))
    # y grid: 1, 2, 5 per decade; label 1 and (if few decades) 2 and 5
    decades = int(round(lhi - llo))
    for e in range(int(llo), int(lhi) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if v < lo or v > hi:
                continue
            y = Y(v)
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>'
                       % (left, y, left + pw, y, "#ccc" if m == 1 else "#eee"))
            if m == 1 or decades <= 3:
                out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                           % (left - 6, y + 4, fmt_rate(v)))
    step = nice_step(tmax)
    t = 0.0
    while t <= tmax + 1e-9:
        x = X(t)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>'
                   % (x, top, x, top + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (x, top + ph + 16, fmt_time(t)))
        t += step
    out.append('<text x="%d" y="%d" text-anchor="middle">elapsed</text>'
               % (left + pw // 2, height - 8))
    for i, (label, s) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        good = [(t, v) for t, v in s if v and v > 0]
        if len(good) == 1:
            t, v = good[0]
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (X(t), Y(v), color))
        elif good:
            d = " ".join("%.1f,%.1f" % (X(t), Y(v)) for t, v in good)
            out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                       % (color, d))
        ly = top + 8 + i * 18
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>'
                   % (width - legend_w, ly, width - legend_w + 22, ly, color))
        out.append('<text x="%d" y="%d">%s</text>'
                   % (width - legend_w + 28, ly + 4, escape(label)))
    out.append("</svg>")
    return "\n".join(out)


def mean_series(runs_samples):
    """Average several runs' throughput samples, bucketed by rounded elapsed
    time, into one series.  runs_samples: list of [[t, v], ...]."""
    buckets = {}
    for samples in runs_samples:
        for pair in samples or []:
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                continue
            buckets.setdefault(round(t), []).append(v)
    return [(t, sum(vs) / len(vs)) for t, vs in sorted(buckets.items())]
