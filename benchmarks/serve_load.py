"""Load on the HTTP API: `tuner serve` as a new process on loopback (SQLite storage in a
temporary directory), then C concurrent clients (httpx.AsyncClient, a connection each), each
POSTing a fixed spec to /v1/evaluate until N requests are answered; per concurrency level the
requests per second, the latency percentiles, the server's CPU time per request and its
resident memory (VmRSS) at the start, the middle and the end of the level. Every answer must
be 200 and equal the first.

    python benchmarks/serve_load.py [--clients 8,32] [--requests 3000] [--json]

Client and server share the machine's cores: the figures are what one machine sustains with
both on it."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "search_spaces" / "examples" / "llama3-70b-h100-fixed.yaml"
_ADDRESS = re.compile(r"tuner serve: (http://\S+) ")


def rss_mib(pid: int) -> float:
    """The process's resident memory in MiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """The process's CPU seconds so far, user and system (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`tuner serve --port 0` in `tmp`; its process and URL once it answers."""
    log = tmp / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--port", "0",
                                 "--storage", f"sqlite:///{tmp / 'load.db'}"], cwd=tmp,
                                stdout=subprocess.DEVNULL, stderr=out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = _ADDRESS.search(log.read_text(errors="replace"))
        if found:
            try:
                if httpx.get(f"{found.group(1)}/openapi.json", timeout=5).status_code == 200:
                    return proc, found.group(1)
            except httpx.TransportError:
                pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"tuner serve did not start: {log.read_text(errors='replace')}")


async def _client(url: str, todo: Iterator[int], half: int, body: bytes, pid: int,
                  run: dict[str, Any]) -> None:
    """One client: its own connection, one request at a time, until `todo` is exhausted."""
    headers = {"content-type": "application/yaml"}
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for i in todo:
            start = time.perf_counter()
            answer = await http.post("/v1/evaluate", content=body, headers=headers)
            run["latencies"].append(time.perf_counter() - start)
            if answer.status_code != 200:
                raise SystemExit(f"answer {answer.status_code}: {answer.text[:200]}")
            run["answers"].add(answer.content)
            if i == half:
                run["rss_mib"].append(rss_mib(pid))


async def _level(url: str, pid: int, clients: int, requests: int, body: bytes
                 ) -> dict[str, Any]:
    """`requests` POSTs by `clients` concurrent clients: latencies (s), wall, server CPU
    seconds, RSS samples."""
    run: dict[str, Any] = {"latencies": [], "answers": set(), "rss_mib": [rss_mib(pid)]}
    todo = iter(range(requests))
    started, cpu = time.perf_counter(), cpu_s(pid)
    await asyncio.gather(*(_client(url, todo, requests // 2, body, pid, run)
                           for _ in range(clients)))
    run["wall_s"], run["server_cpu_s"] = time.perf_counter() - started, cpu_s(pid) - cpu
    run["rss_mib"].append(rss_mib(pid))
    if len(run["answers"]) != 1:
        raise SystemExit(f"{len(run['answers'])} different answers to the same request")
    return run


def summary(clients: int, run: dict[str, Any]) -> dict[str, Any]:
    q = statistics.quantiles(run["latencies"], n=100, method="inclusive")
    n = len(run["latencies"])
    return {"clients": clients, "requests": n, "requests_per_s": n / run["wall_s"],
            "server_cpu_ms_per_request": run["server_cpu_s"] / n * 1e3,
            "p50_ms": q[49] * 1e3, "p95_ms": q[94] * 1e3, "p99_ms": q[98] * 1e3,
            "rss_start_mib": run["rss_mib"][0], "rss_middle_mib": run["rss_mib"][1],
            "rss_end_mib": run["rss_mib"][-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default="8,32", help="concurrency levels, e.g. 8,32")
    parser.add_argument("--requests", type=int, default=3000, help="requests per level")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    body = SPEC.read_bytes()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp))
        try:
            asyncio.run(_level(url, proc.pid, 4, 50, body))  # warm-up: imports, caches
            for clients in (int(c) for c in args.clients.split(",")):
                run = asyncio.run(_level(url, proc.pid, clients, args.requests, body))
                rows.append(summary(clients, run))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"POST /v1/evaluate ({SPEC.name}, YAML), tuner serve on loopback:")
    print("clients  requests  requests/s  p50 ms  p95 ms  p99 ms  server CPU ms/request  "
          "server RSS MiB (start/middle/end)")
    for r in rows:
        print(f"{r['clients']:>7}  {r['requests']:>8}  {r['requests_per_s']:>10.0f}  "
              f"{r['p50_ms']:>6.1f}  {r['p95_ms']:>6.1f}  {r['p99_ms']:>6.1f}  "
              f"{r['server_cpu_ms_per_request']:>20.2f}  "
              f"{r['rss_start_mib']:.1f} / {r['rss_middle_mib']:.1f} / {r['rss_end_mib']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
