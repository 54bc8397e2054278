"""nmt serve's GET /metrics read by Prometheus' own parser (prometheus_client): its counters move by
exactly what the test sends, and a scrape needs the API key when the server has keys."""

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client is not installed")


@pytest.fixture()
def server(tmp_path, nmt_binary, model_dir):
    key = "a" * 16 + "0123456789abcdef"
    key_file = tmp_path / "keys"
    key_file.write_text(key + "\n")
    os.chmod(key_file, 0o600)
    log = open(tmp_path / "serve.log", "w+")
    process = subprocess.Popen(
        [nmt_binary, "serve", "--model", str(model_dir), "--port", "0", "--threads", "1", "--api-key-file",
         str(key_file)],
        stdout=log, stderr=subprocess.STDOUT)
    port = None
    deadline = time.monotonic() + 60
    while port is None and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
        log.seek(0)
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", log.read())
        port = int(found.group(1)) if found else None
    if port is None:
        process.kill()
        log.seek(0)
        pytest.fail("nmt serve did not start: " + log.read())
    yield f"http://127.0.0.1:{port}", key
    process.terminate()
    assert process.wait(timeout=30) == 0
    log.close()


def call(url, key=None, body=None):
    """(status, body) of a GET, or of a POST of `body` as JSON."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(base, key):
    """Every sample of /metrics as {(name, sorted labels): value}, through prometheus_client's parser."""
    status, text = call(base + "/metrics", key)
    assert status == 200, text
    samples = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_counters_move_by_what_was_sent(server):
    base, key = server
    before = scrape(base, key)
    sentences = ["The dog eats .", "A frog sees the bridge .", "Two wolves ."]
    for _ in range(4):
        status, text = call(base + "/translate", key, {"text": sentences})
        assert status == 200, text
    assert call(base + "/translate", None, {"text": sentences})[0] == 401
    assert call(base + "/translate", "wrong-key-of-some-length", {"text": sentences})[0] == 401
    assert call(base + "/nothing")[0] == 404
    # An exchange is counted once its answer's last byte is written, which the client may see
    # before the server's thread has: scraped again until the last request is in.
    deadline = time.monotonic() + 10
    while True:
        after = scrape(base, key)
        if after.get(("nmt_http_requests_total", (("route", "other"), ("status", "404")))) or time.monotonic() > deadline:
            break
        time.sleep(0.05)

    def moved(name, **labels):
        series = (name, tuple(sorted(labels.items())))
        return after.get(series, 0) - before.get(series, 0)

    assert moved("nmt_http_requests_total", route="/translate", status="200") == 4
    assert moved("nmt_http_requests_total", route="/translate", status="401") == 2
    assert moved("nmt_http_requests_total", route="other", status="404") == 1
    assert moved("nmt_http_requests_total", route="/metrics", status="200") >= 1  # the first scrape
    assert moved("nmt_http_rejects_total", reason="unauthorized") == 2
    assert moved("nmt_http_rejects_total", reason="not_found") == 1
    assert moved("nmt_sentences_translated_total") == 12
    assert moved("nmt_source_subwords_total") > 12
    assert moved("nmt_http_request_duration_seconds_count", route="/translate") == 6
    assert moved("nmt_http_request_duration_seconds_bucket", route="/translate", le="+Inf") == 6
    assert moved("nmt_batch_sentences_sum") == 12
    assert after[("nmt_models_loaded", ())] == 1
    assert after[("nmt_ready", ())] == 1
    # Buckets are cumulative: each holds at least the one below it.
    buckets = sorted((float(dict(labels)["le"]), value) for (name, labels), value in after.items()
                     if name == "nmt_http_request_duration_seconds_bucket" and dict(labels)["route"] == "/translate")
    assert all(low[1] <= high[1] for low, high in zip(buckets, buckets[1:]))


def test_metrics_need_the_key_and_health_does_not(server):
    base, key = server
    assert call(base + "/metrics")[0] == 401
    assert call(base + "/metrics", key + "x")[0] == 401
    assert call(base + "/health")[0] == 200
    assert call(base + "/ready")[0] == 200
