"""The t2t-lite-serve process: a model that cannot load is one line and exit 2 before the port
opens; under a bounded load (8 clients on 127.0.0.1) every request gets its translation or a 503
and nothing hangs, with the server's memory bounded; the web page in headless Chromium (Debian's
chromium and chromedriver, driven by Selenium) translates a typed sentence and draws its
attention; SIGTERM with requests in flight answers them all, then exits 0."""

import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def serve_command(*args):
    return [sys.executable, "-c", "from t2t_lite.cli.serve import run; run()",
            f"--usr_dir={os.path.join(TESTS, 'usr_problems.py')}", *args]


class Server:
    """A t2t-lite-serve process on a free port, its stderr collected."""

    def __init__(self, *args):
        self.process = subprocess.Popen(serve_command("--port=0", *args), stderr=subprocess.PIPE,
                                        text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        self.log, self.url = [], None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 120
        while self.url is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("".join(self.log))
            time.sleep(0.1)

    def _read(self):
        for line in self.process.stderr:
            self.log.append(line)
            found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
            if found:
                self.url = found.group(1)

    def request(self, path, body=None, timeout=60):
        """(status, JSON answer, headers)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path.lstrip("/"), data=data,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read()), response.headers
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read()), error.headers

    def wait_healthy(self):
        deadline = time.monotonic() + 120
        while self.request("/healthz")[0] != 200:
            assert time.monotonic() < deadline, "".join(self.log)
            time.sleep(0.2)

    def rss_megabytes(self):
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as status:
            return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1)) / 1024

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(trained_reverse):
    """The trained demo served with a small queue and batches (of two requests of 12 inputs)."""
    server = Server(f"--model_dir={trained_reverse.runner.model_dir.path}", "--max_queue=200",
                    "--max_batch_tokens=256")
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.mark.slow  # a process importing TensorFlow
def test_a_model_that_cannot_load_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run(serve_command(f"--model_dir={tmp_path / 'none'}", "--port=0"),
                            capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1 and str(tmp_path / "none") in errors[0]
    assert "serving" not in result.stderr  # the port never opened


def test_a_bounded_load_gets_answers_or_503s(server):
    """8 clients, 12 requests each of 1-8 inputs: each answered with its translations or a 503
    with Retry-After; none hangs (every client has a timeout)."""
    before = server.rss_megabytes()

    def client(number):
        answers = []
        for k in range(12):
            inputs = [" ".join(str((number + k + j) % 10) for j in range(1 + (k + i) % 8))
                      for i in range(1 + (number * k) % 8)]
            status, answer, headers = server.request("/translate", {"inputs": inputs},
                                                     timeout=120)
            if status == 200:
                assert answer["outputs"] == [" ".join(reversed(s.split())) for s in inputs]
            else:
                assert status == 503 and headers["Retry-After"] == "1", answer
            answers.append(status)
        return answers

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = [s for answers in pool.map(client, range(8)) for s in answers]
    assert len(statuses) == 96 and statuses.count(200) >= 48, statuses
    assert server.rss_megabytes() < before + 200
    assert server.request("/healthz")[0] == 200


def test_the_web_page_translates_and_draws_the_attention(server, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1000,900",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        browser.get(server.url)
        wait = WebDriverWait(browser, 60)
        wait.until(lambda b: b.find_element(By.ID, "health").text == "ready")
        browser.find_element(By.ID, "source").send_keys("1 2 3 4 5")
        browser.find_element(By.ID, "n_best").send_keys("2")
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#heatmap td"))
        assert browser.find_element(By.CLASS_NAME, "output").text == "5 4 3 2 1"
        candidates = browser.find_elements(By.CLASS_NAME, "candidate_output")
        assert len(candidates) == 2 and candidates[0].text == "5 4 3 2 1"
        rows = browser.find_elements(By.CSS_SELECTOR, "#heatmap tbody tr")
        assert [row.find_element(By.TAG_NAME, "th").text for row in rows][:5] == \
            ["5", "4", "3", "2", "1"] and len(rows) == 6  # and EOS
        drawn = [[float(cell.get_attribute("data-weight"))
                  for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows]
        served = server.request("/translate", {"inputs": ["1 2 3 4 5"], "n_best": 2,
                                               "attention": True})[1]["n_best"][0][0]
        assert drawn == served["attention"]["weights"]  # the API's, cell by cell
        browser.find_element(By.ID, "n_best").clear()
        browser.find_element(By.ID, "beam_size").send_keys("0")
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda b: b.find_element(By.ID, "status").text)
        assert "beam_size" in browser.find_element(By.ID, "status").text
        assert browser.save_screenshot(str(tmp_path / "page.png"))
        # A parser's output as the page draws it: a tree of labels over the words.
        labels = browser.execute_script(
            "drawTree('(S (NP (DT The) (NN dog)) (VP (VBZ barks)))');"
            "return [...document.querySelectorAll('#tree .label')].map(e => e.textContent);")
        assert labels == ["S", "NP", "DT", "NN", "VP", "VBZ"]
        assert browser.find_element(By.ID, "tree").text.split() == \
            ["S", "NP", "DT", "The", "NN", "dog", "VP", "VBZ", "barks"]
    finally:
        browser.quit()


def test_sigterm_answers_the_requests_in_flight_then_exits_0(server):
    """The last test of the module: it stops the module's server."""
    inputs = [" ".join(str((i + j) % 10) for j in range(8)) for i in range(12)]
    answered = len([line for line in server.log if "POST /translate" in line])

    def translate():
        status = server.request("/translate", {"inputs": inputs}, 120)[0]
        return status, time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        pending = [pool.submit(translate) for _ in range(8)]  # a batch each
        deadline = time.monotonic() + 60
        while len([line for line in server.log if "POST /translate" in line]) == answered:
            assert time.monotonic() < deadline, "".join(server.log)
            time.sleep(0.01)  # until the first is answered: the others are in flight
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        answers = [future.result() for future in pending]
    assert server.process.wait(timeout=120) == 0, "".join(server.log)
    assert [status for status, _ in answers] == [200] * 8
    assert max(done for _, done in answers) > signalled  # some were in flight
    assert any("stopped by SIGTERM" in line for line in server.log)
