"""Renders the built docs site in headless Chromium: screenshots, and the site's own search.

    make docs                                   # builds site/
    python scripts/dev/browser_check.py         # serves site/ on localhost, then checks it
    python scripts/dev/browser_check.py --out_dir=/tmp/shots --chromium=/usr/bin/chromium

It serves `--site_dir` on 127.0.0.1 (a free port), and with Debian's `chromium` (headless,
no sandbox, no GPU, no network beyond localhost, a fresh profile):
  1. saves a screenshot of the home page, one guide and one API page into `--out_dir`;
  2. opens the home page under the Chrome DevTools protocol (over `--remote-debugging-pipe`:
     no driver, no websocket), types "resume" into the site's search box as a user would and
     reads the results the search worker lists: every stage page (stages/*) must be there.
It exits 1 naming what failed: a page that did not render (its title missing), a screenshot
not written, or a stage page the search did not find.
"""

import contextlib
import functools
import http.server
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("site_dir", "site", "The built site (make docs).")
flags.DEFINE_string("out_dir", "docs/images/screenshots", "Where the screenshots go.")
flags.DEFINE_string(
    "chromium", "chromium", "The Chromium executable (Debian: apt-get install chromium)."
)
flags.DEFINE_string("window_size", "1280,900", "Width,height of the screenshots.")
flags.DEFINE_integer("budget_ms", 8000, "Virtual time for a page's scripts (search) to run.")

#: Screenshot name -> page path and a text its rendered DOM must contain.
PAGES = {
    "home.png": ("", "The five stages"),
    "guide_slurm.png": ("guides/slurm/", "Describing your cluster"),
    "api_interfaces.png": ("api/interfaces/", "SequentialModel"),
}
#: The pages the search for "resume" must find.
STAGES = (
    "stages/collect/",
    "stages/train-encoder/",
    "stages/encode/",
    "stages/train-sequential/",
    "stages/train-controller/",
)


@contextlib.contextmanager
def serving(directory: str):
    """An HTTP server of `directory` on 127.0.0.1 in a thread; yields its base URL."""
    handler = functools.partial(QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _command(profile: str, *args: str) -> list[str]:
    return [
        FLAGS.chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-sync",
        "--disable-component-update",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={FLAGS.window_size}",
        *args,
    ]


def chromium(url: str, *args: str) -> str:
    """Runs headless Chromium on `url` with `args` in a fresh profile; returns its stdout."""
    with tempfile.TemporaryDirectory(prefix="rl755_chromium_") as profile:
        command = _command(profile, f"--virtual-time-budget={FLAGS.budget_ms}", *args, url)
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"chromium failed on {url}: {out.stderr[-2000:]}")
    return out.stdout


def check(base: str, out_dir: str) -> list[str]:
    """The problems found (empty: all good)."""
    problems = []
    os.makedirs(out_dir, exist_ok=True)
    for name, (path, text) in PAGES.items():
        dom = chromium(base + path, "--dump-dom")
        if text not in dom:
            problems.append(f"{path or 'home'}: the rendered page has no {text!r}")
        shot = os.path.join(out_dir, name)
        with contextlib.suppress(FileNotFoundError):
            os.remove(shot)
        chromium(base + path, f"--screenshot={os.path.abspath(shot)}")
        if not os.path.exists(shot) or os.path.getsize(shot) == 0:
            problems.append(f"{path or 'home'}: no screenshot written to {shot}")
        else:
            print(f"screenshot {shot} ({os.path.getsize(shot) // 1024} KB) of {base + path}")
    links = search(base, "resume")
    found = sorted({s for s in STAGES for link in links if link.startswith(base + s)})
    print(f"search for 'resume': {len(links)} results; stage pages: {', '.join(found) or 'none'}")
    problems += [f"the search for 'resume' did not find {s}" for s in STAGES if s not in found]
    return problems


#: Types the query into mkdocs-material's search box and resolves with the result links.
SEARCH_JS = """new Promise(done => {
  const box = document.querySelector("input[data-md-component=search-query]");
  document.querySelector("#__search").checked = true;
  box.focus();
  const type = () => {  // again until the search worker, loading its index, answers
    box.value = QUERY;
    box.dispatchEvent(new Event("input", {bubbles: true}));
    box.dispatchEvent(new KeyboardEvent("keyup", {key: "e", bubbles: true}));
  };
  const start = Date.now();
  (function poll() {
    const links = [...document.querySelectorAll(".md-search-result__link")].map(a => a.href);
    if (links.length || Date.now() - start > 20000) return done(links);
    type();
    setTimeout(poll, 500);
  })();
})"""


class DevTools:
    """Chrome DevTools protocol over `--remote-debugging-pipe` (fds 3 and 4, NUL-framed)."""

    def __init__(self, profile: str):
        ours_read, theirs_write = os.pipe()
        theirs_read, ours_write = os.pipe()

        def pipes():  # in the child: Chromium reads commands on fd 3, answers on fd 4
            os.dup2(theirs_read, 3)
            os.dup2(theirs_write, 4)

        self.process = subprocess.Popen(
            _command(profile, "--remote-debugging-pipe", "about:blank"),
            preexec_fn=pipes,
            pass_fds=(3, 4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(theirs_read)
        os.close(theirs_write)
        self.read_fd, self.write_fd, self.buffer, self.last_id = ours_read, ours_write, b"", 0

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Sends one command and returns its result; raises on an error or after 60 s."""
        self.last_id += 1
        message = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            while b"\0" not in self.buffer:
                if not select.select([self.read_fd], [], [], max(0, deadline - time.monotonic()))[
                    0
                ]:
                    raise TimeoutError(f"no answer from chromium to {method}")
                self.buffer += os.read(self.read_fd, 1 << 16)
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.last_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def close(self):
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self.read_fd)
        os.close(self.write_fd)


def search(base: str, query: str) -> list[str]:
    """The result links of the site's search box for `query`, typed on the home page."""
    with tempfile.TemporaryDirectory(prefix="rl755_chromium_") as profile:
        tools = DevTools(profile)
        try:
            target = tools.call("Target.createTarget", {"url": base})["targetId"]
            session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"
            ]
            loaded = f"location.href.startsWith({json.dumps(base)}) && document.readyState"
            for _ in range(300):  # until the site's page (not about:blank) has loaded
                state = tools.call(
                    "Runtime.evaluate", {"expression": loaded, "returnByValue": True}, session
                )["result"].get("value")
                if state == "complete":
                    break
                time.sleep(0.1)
            expression = SEARCH_JS.replace("QUERY", json.dumps(query))
            result = tools.call(
                "Runtime.evaluate",
                {"expression": expression, "awaitPromise": True, "returnByValue": True},
                session,
            )
            if "exceptionDetails" in result:
                raise RuntimeError(f"the search script failed: {result['exceptionDetails']}")
            return result["result"]["value"]
        finally:
            tools.close()


def main(argv):
    del argv
    if not os.path.exists(os.path.join(FLAGS.site_dir, "index.html")):
        sys.exit(f"No built site in {FLAGS.site_dir!r}: run `make docs` first.")
    if shutil.which(FLAGS.chromium) is None:
        sys.exit(f"No {FLAGS.chromium!r} on PATH: apt-get install chromium (Debian).")
    start = time.perf_counter()
    with serving(FLAGS.site_dir) as base:
        problems = check(base, FLAGS.out_dir)
    print(f"browser check: {time.perf_counter() - start:.1f} s")
    if problems:
        sys.exit("Browser check failed:\n  " + "\n  ".join(problems))
    print("browser check: ok")


if __name__ == "__main__":
    app.run(main)
