"""Draws docs/img/serve_demo.png, the README's picture of t2t-lite-serve's web page: the quick
start's demo model served, the README's line translated with its 3 best outputs, and the
attention of the best, in headless Chromium (Debian's chromium and chromedriver, driven by
Selenium, as tests/test_serve_process.py drives them).

    python docs/serve_screenshot.py --model_dir=/tmp/t2t_demo
"""

import argparse
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--line", default="1 2 3 4 5 6 7")
    parser.add_argument("--output", default=str(ROOT / "docs" / "img" / "serve_demo.png"))
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", "from t2t_lite.cli.serve import run; run()",
                               f"--model_dir={args.model_dir}", "--port=0"],
                              stderr=subprocess.PIPE, text=True)
    try:
        url = next(found.group(1) for found in (
            re.search(r"at (http://127\.0\.0\.1:\d+/)", line) for line in server.stderr) if found)
        while True:
            try:
                urllib.request.urlopen(url + "healthz", timeout=10)
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        screenshot(url, args.line, args.output)
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(f"wrote {args.output}")


def screenshot(url, line, output):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--window-size=900,1000",
                     "--hide-scrollbars", f"--user-data-dir={profile}"):
            options.add_argument(flag)
        browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            browser.get(url)
            wait = WebDriverWait(browser, 60)
            wait.until(lambda b: b.find_element(By.ID, "health").text == "ready")
            browser.find_element(By.ID, "source").send_keys(line)
            browser.find_element(By.ID, "n_best").send_keys("3")
            browser.find_element(By.ID, "translate").click()
            wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#heatmap td"))
            browser.save_screenshot(output)
        finally:
            browser.quit()


if __name__ == "__main__":
    main()
