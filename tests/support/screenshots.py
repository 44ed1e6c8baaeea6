"""Screenshots as a user would take them: a page in a real headless browser (Debian's chromium), and a command in a
real terminal (xterm on a virtual X display, Xvfb, captured with ImageMagick's `import`). `missing_tools()` names what
this machine lacks (.ci/setup installs them)."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from PIL import Image

BROWSER = "chromium"
TERMINAL_TOOLS = ("Xvfb", "xterm", "import")
# What a page may take to load and draw (virtual time: it does not slow a fast page down).
PAGE_BUDGET_MS = 20000
FONT, FONT_SIZE = "DejaVu Sans Mono", 11
DISPLAY_WAIT_SECONDS = 10
# Run in the xterm: note the window's id (xterm sets $WINDOWID) in $0, show `$ <prompt>`, then run the command.
SHOW_PROMPT = 'echo "$WINDOWID" > "$0"; echo "\\$ $1"; shift; exec "$@"'


class ScreenshotError(RuntimeError):
    """A screenshot could not be taken; the message says which tool failed and what it printed."""


def missing_tools() -> list[str]:
    """The programs these screenshots need that are not on PATH."""
    return [tool for tool in (BROWSER, *TERMINAL_TOOLS) if shutil.which(tool) is None]


def page(url: str, path: Path, width: int = 1200, height: int = 560) -> Path:
    """`url` as headless chromium draws it in a window of width x height (software rendering, no GPU)."""
    with tempfile.TemporaryDirectory(prefix="kubetrain-chromium-") as profile:
        done = subprocess.run([BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--user-data-dir={profile}", f"--window-size={width},{height}",
                               f"--virtual-time-budget={PAGE_BUDGET_MS}", f"--screenshot={path}", url],
                              capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not path.exists():
        raise ScreenshotError(f"chromium exited {done.returncode} without {path}: {done.stderr[-2000:]}")
    return path


@contextmanager
def terminal(command: Sequence[str], env: Mapping[str, str], prompt: str, columns: int = 100,
             rows: int = 12) -> Iterator[Callable[[Path], Path]]:
    """`command` runs in an xterm of columns x rows (white on black) on its own virtual display while the block runs.

    The window shows `$ prompt` first, as if typed. The block gets `capture(path)`, which writes the window as it is
    now as a PNG; the command must still be running then (ScreenshotError otherwise). Everything stops at the end.
    """
    # Xvfb picks a free display itself and writes its number to -displayfd once it accepts clients.
    ready, told = os.pipe()
    screen = subprocess.Popen(["Xvfb", "-displayfd", str(told), "-screen", "0", "1600x900x24", "-nolisten", "tcp"],
                              pass_fds=(told,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(told)
    display = ""
    xterm: subprocess.Popen[bytes] | None = None
    with tempfile.TemporaryDirectory(prefix="kubetrain-xterm-") as folder:
        window = Path(folder) / "window"  # xterm tells its command the window's id ($WINDOWID)

        def capture(path: Path) -> Path:
            if xterm is None or xterm.poll() is not None or not window.exists():
                raise ScreenshotError(f"{command[0]} ended (xterm: {xterm and xterm.poll()}) before the screenshot")
            done = subprocess.run(["import", "-display", display, "-window", window.read_text().strip(), str(path)],
                                  capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise ScreenshotError(f"import exited {done.returncode}: {done.stderr[-2000:]}")
            return path

        try:
            display = _display_of(screen, ready)
            xterm = subprocess.Popen(["xterm", "-display", display, "-geometry", f"{columns}x{rows}+0+0", "-fa",
                                      FONT, "-fs", str(FONT_SIZE), "-bg", "black", "-fg", "white", "+sb", "-e", "sh",
                                      "-c", SHOW_PROMPT, str(window), prompt, *command],
                                     env={**env, "DISPLAY": display}, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            yield capture
        finally:
            os.close(ready)
            for process in (xterm, screen):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(timeout=30)


def colours(path: Path) -> int:
    """How many different colours the PNG has: a blank or failed capture has one or two."""
    with Image.open(path) as image:
        found = image.convert("RGB").getcolors(maxcolors=1 << 24)
    return len(found or [])


def _display_of(screen: subprocess.Popen[bytes], ready: int) -> str:
    """The display Xvfb serves, once it says it is ready; ScreenshotError with what it printed if it does not."""
    told = b""
    deadline = time.monotonic() + DISPLAY_WAIT_SECONDS
    while not told.endswith(b"\n"):
        readable, _, _ = select.select([ready], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(ready, 16) if readable else b""
        if not chunk:
            screen.kill()
            said = screen.communicate()[1].decode(errors="replace")
            raise ScreenshotError(f"Xvfb did not start within {DISPLAY_WAIT_SECONDS} s: {said[-2000:]}")
        told += chunk
    return f":{told.decode().strip()}"
