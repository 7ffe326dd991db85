"""The report of ``scale.py``: its Markdown tables and its plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import run

Result = dict[str, Any]


def _num(d: Result | None, key: str) -> float | None:
    if not d or "error" in d or key not in d:
        return None
    return float(d[key])


def _cell(d: Result | None, key: str, fmt: str = "%.1f") -> str:
    if d and "error" in d:
        return "no answer" if "timeout" in str(d["error"]) else "error"
    v = _num(d, key)
    return "-" if v is None else fmt % v


def _ratio(top: float | None, bottom: float | None) -> str:
    if top is None or not bottom:
        return "-"
    return "%.1fx" % (top / bottom)


def table(results: Result) -> str:
    """Markdown: per database, hosts and worker count, each query's server
    CPU per request and latency, then claims, start-up and memory."""
    lines = [
        "| db | hosts | workers | measure | Berth | upstream | ratio "
        "| Berth p50/p99 ms | upstream p50/p99 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for db_kind, sizes in results.items():
        for hosts, res in sizes.items():
            for key in [k for k in res if k.startswith("berth/")]:
                w = key.split("/")[1]
                b = res[key]
                u = res.get(key.replace("berth", "upstream"), {})

                def row(
                    label: str,
                    bd: Result | None,
                    ud: Result | None,
                    field: str,
                    ratio: str,
                    lat: bool = False,
                    where: str = "| %s | %s | %s " % (db_kind, hosts, w),
                ) -> None:
                    bl = ul = ""
                    if lat:
                        bl = "%s/%s" % (_cell(bd, "p50_ms"), _cell(bd, "p99_ms"))
                        ul = "%s/%s" % (_cell(ud, "p50_ms"), _cell(ud, "p99_ms"))
                    lines.append(
                        where
                        + "| %s | %s | %s | %s | %s | %s |"
                        % (label, _cell(bd, field), _cell(ud, field), ratio, bl, ul)
                    )

                for q in [k for k in b if k not in ("start", "claims", "end")]:
                    row(
                        "%s CPU ms" % q,
                        b.get(q),
                        u.get(q),
                        "cpu_ms",
                        _ratio(_num(u.get(q), "cpu_ms"), _num(b.get(q), "cpu_ms")),
                        lat=True,
                    )
                bc, uc = b.get("claims"), u.get("claims")
                row(
                    "claims/s",
                    bc,
                    uc,
                    "claims_per_s",
                    _ratio(_num(bc, "claims_per_s"), _num(uc, "claims_per_s")),
                )
                if _num(bc, "server_cpu_ms_per_claim") is not None:
                    row(
                        "server CPU ms per claim",
                        bc,
                        uc,
                        "server_cpu_ms_per_claim",
                        _ratio(
                            _num(uc, "server_cpu_ms_per_claim"), _num(bc, "server_cpu_ms_per_claim")
                        ),
                    )
                for label, field in (
                    ("first answer s", "first_answer_s"),
                    ("worker RSS MB", "rss_mb"),
                    ("all workers PSS MB", "pss_total_mb"),
                ):
                    row(label, b.get("start"), u.get("start"), field, "-")
                for label, field in (
                    ("worker RSS MB at the end", "rss_mb"),
                    ("all workers PSS MB at the end", "pss_total_mb"),
                ):
                    row(label, b.get("end"), u.get("end"), field, "-")
    return "\n".join(lines)


def inprocess_table(results: Result) -> str:
    """Markdown: Berth's in-process load, refresh and memo figures."""
    lines = [
        "| db | hosts | providers | load whole s | refresh after a claim ms "
        "| after an inventory change ms | simple search cold / warm / "
        "after a claim ms | nested search cold / warm / after a claim ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for db_kind, sizes in results.items():
        for hosts, res in sizes.items():
            d = res.get("inprocess")
            if not d:
                continue
            memo = [
                "%.2f / %.2f / %.2f"
                % tuple(
                    d.get("%s_search_%s_ms" % (q, k), float("nan"))
                    for k in ("cold", "warm", "after_claim")
                )
                for q in ("simple", "nested")
            ]
            lines.append(
                "| %s | %s | %d | %.2f | %.2f | %.2f | %s | %s |"
                % (
                    db_kind,
                    hosts,
                    d["providers"],
                    d["load_s"],
                    d["refresh_after_claim_ms"],
                    d["refresh_after_inventory_ms"],
                    *memo,
                )
            )
    return "\n".join(lines)


def plot(results: Result, path: Path) -> None:
    """Server CPU and p50 latency per query against world size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queries = list(run.QUERIES)
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    for col, suffix in enumerate(("", "+limit50")):
        for row, key in enumerate(("cpu_ms", "p50_ms")):
            ax = axes[row][col]
            for db_kind, sizes in results.items():
                for impl, style in (("berth", "-"), ("upstream", "--")):
                    for q in queries:
                        xs, ys = [], []
                        for hosts, res in sizes.items():
                            first = [k for k in res if k.startswith(impl + "/")]
                            d = res.get(first[0], {}).get(q + suffix, {}) if first else {}
                            if key in d:
                                xs.append(int(hosts))
                                ys.append(float(d[key]))
                        if xs:
                            ax.plot(
                                xs, ys, style, marker="o", label="%s %s %s" % (impl, db_kind, q)
                            )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("hosts")
            ax.set_ylabel("server CPU ms per request" if key == "cpu_ms" else "median latency ms")
            ax.set_title(
                "%s%s"
                % (
                    "CPU" if key == "cpu_ms" else "latency",
                    " with limit=50" if suffix else ", full answers",
                )
            )
            ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=90)
