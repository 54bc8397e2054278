#!/usr/bin/env python3
"""Hostile clients against a running nmt serve, beside a real client (scripts/bench/hostile.sh).

For --seconds, keeps open at once:
  --stalled    connections that send part of a request line and headers, then a byte a second
  --trickling  connections whose headers are whole and whose body comes a byte a second
  --chunked    chunked bodies that never end (a 16 KiB chunk every 100 ms)
  --gzip       gzip bombs: a body of a few hundred KiB that inflates to --gzip-mib MiB of zeros
  --headers    about 63 KiB of one-letter header fields, then a body that never comes
  --announcing headers announcing a 1 MiB body, then nothing
  --unread     1,000 pipelined GET / on one connection, and not a byte of the answers read (more
               of them than the server's --connections, 128)
  --big-json   1 MB JSON bodies (256 long sentences with attention: 413 once encoded), one after
               another
  --lingering  malformed requests, their refusal unread, the connection kept open
Each reconnects when the server closes it. Meanwhile a real client, in a process of its own so
that the attackers' work does not delay its reading, sends one sentence on a new connection every
200 ms and times its answer, and GET /health likewise; the server's resident memory is read from
/proc every 100 ms. Before the attack, two refusals are checked: an error about a 200 KB malformed
string quotes little of it, and a page's Host (DNS rebinding) gets 421. Prints Markdown rows:
| what | value | target |; with --only KIND, that attack alone and one row:
| attack | real requests answered, failed | POST /translate p99 ms | GET /health p99 ms | RSS growth MiB |.
"""
import argparse
import asyncio
import gzip
import json
import multiprocessing
import statistics
import sys
import time


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


KINDS = ("stalled", "trickling", "chunked", "gzip", "headers", "announcing", "unread", "big_json", "lingering")
HEAD = "POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


async def attacker(port, stop, counts, kind, bomb):
    """One hostile connection, reopened whenever the server closes it."""
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["connect_errors"] += 1
            await asyncio.sleep(0.5)
            continue
        counts[kind] += 1
        try:
            if kind in ("stalled", "trickling"):
                # Part of a request line, or whole headers and the start of a body; then a byte a second.
                first = (b"POST /translate HTTP/1.1\r\nHo" if kind == "stalled"
                         else (HEAD + "Content-Length: 100000\r\n\r\n").encode())
                writer.write(first)
                while time.monotonic() < stop and not reader.at_eof():
                    await asyncio.sleep(1)
                    writer.write(b"s" if kind == "stalled" else b" ")
                    await writer.drain()
            elif kind == "chunked":
                writer.write((HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode())
                chunk = b"4000\r\n" + b" " * 0x4000 + b"\r\n"
                while time.monotonic() < stop and not reader.at_eof():
                    writer.write(chunk)
                    await writer.drain()
                    await asyncio.sleep(0.1)
            elif kind == "gzip":
                writer.write((HEAD + f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n\r\n").encode())
                writer.write(bomb)
                await writer.drain()
                await asyncio.wait_for(reader.read(), timeout=10)
                await asyncio.sleep(1)
            elif kind in ("headers", "announcing"):
                # 16,000 fields cost 16 times their bytes once parsed; an announced length
                # reserved its bytes of the budget before one came.
                fields = "a:\r\n" * 16000 if kind == "headers" else ""
                writer.write((HEAD + "Content-Length: 1048576\r\n" + fields + "\r\n").encode())
                await writer.drain()
                await wait_closed(reader, writer, stop)
            elif kind == "unread":
                writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 1000)
                await writer.drain()
                await wait_closed(reader, writer, stop, read=False)
            elif kind == "big_json":
                # 256 sentences of 4,000 bytes asking for attention: parsed, encoded, then 413 for
                # the answer they could make.
                body = json.dumps({"text": [("ein hund " * 445)[:4000]] * 256, "attention": True}).encode()
                writer.write((HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
                await writer.drain()
                await asyncio.wait_for(reader.read(), timeout=30)
            else:  # lingering
                writer.write(b"NOT HTTP\r\n\r\n")
                await writer.drain()
                await wait_closed(reader, writer, stop, read=False, poke=True)
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()


async def wait_closed(reader, writer, stop, read=True, poke=False):
    """Until the server closes the connection or the attack ends. `read`: what it sends is read;
    else nothing is, and a close shows as a reset (`poke`: a byte every half second, which the
    server drops, so that a close resets it)."""
    while time.monotonic() < stop:
        if read:
            if not await asyncio.wait_for(reader.read(65536), timeout=max(stop - time.monotonic(), 0.01)):
                return
            continue
        await asyncio.sleep(0.5)
        if poke:
            writer.write(b" ")
        if writer.transport.is_closing() or reader.exception() is not None:
            return


async def ask(port, request):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    return answer


async def real_client(port, stop, sentence, latencies, failures, path="/translate"):
    body = json.dumps({"text": [sentence]}).encode()
    request = (HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    if path == "/health":
        request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    while time.monotonic() < stop:
        start = time.monotonic()
        try:
            answer = await ask(port, request)
            if answer.startswith(b"HTTP/1.1 200 "):
                latencies.append(1000 * (time.monotonic() - start))
            else:
                failures.append(answer[:120])
        except (OSError, asyncio.TimeoutError) as error:
            failures.append(str(error))
        await asyncio.sleep(0.2)


def real_client_process(port, seconds, sentence, path, results):
    """The real client in a process of its own: (latencies, failures) into `results`."""
    latencies, failures = [], []
    asyncio.run(real_client(port, time.monotonic() + seconds, sentence, latencies, failures, path))
    results.put((latencies, [repr(failure) for failure in failures]))


async def refusals(port):
    """Markdown rows for two refusals: what an error quotes, and a foreign Host."""
    body = b'{"text": ["' + b"a" * 200000 + b'\\q"]}'
    answer = await ask(port, (HEAD + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
    error = answer.partition(b"\r\n\r\n")[2]
    print(f"| a 200 KB string with a bad escape: status, error bytes | {answer[9:12].decode()}, {len(error)} "
          f"| 400, < 300 |")
    answer = await ask(port, b"GET /health HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n")
    print(f"| GET /health with Host: attacker.example | {answer[9:12].decode()} | 421 |")


async def memory_watch(pid, stop, samples):
    while time.monotonic() < stop:
        samples.append(rss_mib(pid))
        await asyncio.sleep(0.1)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the server's, for its memory")
    parser.add_argument("--sentence", default="Ein Hund rennt durch den Schnee .")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--stalled", type=int, default=500)
    parser.add_argument("--trickling", type=int, default=500)
    parser.add_argument("--chunked", type=int, default=200)
    parser.add_argument("--gzip", type=int, default=200)
    parser.add_argument("--gzip-mib", type=int, default=1024)
    parser.add_argument("--headers", type=int, default=100)
    parser.add_argument("--announcing", type=int, default=64)
    parser.add_argument("--unread", type=int, default=200)
    parser.add_argument("--big-json", type=int, default=2)
    parser.add_argument("--lingering", type=int, default=200)
    parser.add_argument("--only", choices=KINDS, help="this attack alone, and one Markdown row of its results")
    args = parser.parse_args()
    if args.only:
        for kind in KINDS:
            if kind != args.only:
                setattr(args, kind, 0)

    bomb = gzip.compress(bytes(args.gzip_mib << 20), compresslevel=9)
    before = rss_mib(args.pid)
    quiet_latencies, quiet_health, failures = [], [], []
    if not args.only:
        # The real client alone first: its latency without the attack.
        await real_client(args.port, time.monotonic() + 3, args.sentence, quiet_latencies, failures)
        await real_client(args.port, time.monotonic() + 1, args.sentence, quiet_health, failures, "/health")
        await refusals(args.port)

    counts = {kind: 0 for kind in KINDS}
    counts["connect_errors"] = 0
    stop = time.monotonic() + args.seconds
    tasks = []
    for kind in KINDS:
        for _ in range(getattr(args, kind)):
            tasks.append(asyncio.create_task(attacker(args.port, stop, counts, kind, bomb)))
            if len(tasks) % 100 == 0:
                await asyncio.sleep(0.05)  # connect in waves, as the listen backlog allows
    await asyncio.sleep(2)  # all of them connected before the real client is timed
    reals = []
    for path in ("/translate", "/health"):
        results = multiprocessing.Queue()
        real = multiprocessing.Process(target=real_client_process,
                                       args=(args.port, stop - time.monotonic(), args.sentence, path, results))
        real.start()
        reals.append((real, results))
    samples = []
    await memory_watch(args.pid, stop, samples)
    await asyncio.gather(*tasks, return_exceptions=True)
    (latencies, real_failures), (health, health_failures) = [results.get() for _, results in reals]
    for real, _ in reals:
        real.join()
    failures += real_failures + health_failures

    def ms(values, q):
        return f"{statistics.quantiles(values, n=100)[q - 1]:.1f}" if len(values) >= 2 else "-"

    growth = max(samples, default=before) - before
    if args.only:
        print(f"| {args.only} ({getattr(args, args.only)}) | {len(latencies) + len(health)}, {len(failures)} | "
              f"{ms(latencies, 99)} | {ms(health, 99)} | {growth:.0f} |")
        for failure in failures[:3]:
            print(f"{args.only}: failed: {failure!r}", file=sys.stderr)
        return

    print(f"| hostile connections opened | {counts['stalled']} stalled heads, {counts['trickling']} trickling bodies, "
          f"{counts['chunked']} endless chunked, {counts['gzip']} gzip bombs of {len(bomb) >> 10} KiB "
          f"({args.gzip_mib} MiB inflated), {counts['headers']} floods of header fields, "
          f"{counts['announcing']} announced 1 MiB bodies, {counts['unread']} unread pipelines, "
          f"{counts['big_json']} 1 MB JSON bodies, {counts['lingering']} refusals left unread; "
          f"{counts['connect_errors']} refused | |")
    print(f"| real requests alone: p50 / p99 ms | {ms(quiet_latencies, 50)} / {ms(quiet_latencies, 99)} | |")
    print(f"| GET /health alone: p50 / p99 ms | {ms(quiet_health, 50)} / {ms(quiet_health, 99)} | |")
    print(f"| real requests under attack: answered, failed | {len(latencies) + len(health)}, {len(failures)} "
          f"| all answered |")
    print(f"| real requests under attack: p50 / p99 / max ms | {ms(latencies, 50)} / {ms(latencies, 99)} / "
          f"{max(latencies) if latencies else 0:.1f} | p99 < 100 |")
    print(f"| GET /health under attack: p50 / p99 / max ms | {ms(health, 50)} / {ms(health, 99)} / "
          f"{max(health) if health else 0:.1f} | p99 < 100 |")
    print(f"| server RSS: before, peak, growth MiB | {before:.0f}, {max(samples, default=before):.0f}, "
          f"{growth:.0f} | growth < 256 |")
    for failure in failures[:3]:
        print(f"failed: {failure!r}")


if __name__ == "__main__":
    asyncio.run(main())
