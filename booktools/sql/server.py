"""A throwaway MariaDB server for the tests and `python -m booktools.sql serve`."""

from __future__ import annotations


import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from booktools.sql.engines import URL_ENV





# ------------------------------------------------------------------ a throwaway MariaDB server
SERVER_NAMES = ("mariadbd", "mysqld")
INSTALL_NAMES = ("mariadb-install-db", "mysql_install_db")
SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/libexec")


def mariadb_binaries() -> tuple[str, str] | None:
    """(server, install_db) executables of an installed MariaDB, or None."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *SEARCH_DIRS])

    def find(names):
        return next((found for n in names if (found := shutil.which(n, path=path))), None)

    server, install = find(SERVER_NAMES), find(INSTALL_NAMES)
    return (server, install) if server and install else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def throwaway_mariadb(workdir: str | Path | None = None, timeout: float = 120.0):
    """Start a private MariaDB server on 127.0.0.1 (a fresh data directory, a free port, root
    without password), yield its URL, and stop it again. Needs the mariadb-server package."""
    import pymysql

    binaries = mariadb_binaries()
    if binaries is None:
        raise FileNotFoundError("MariaDB is not installed: apt-get install mariadb-server")
    server, install = binaries
    owned_tmp = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="book-mariadb-") if owned_tmp else workdir)
    data, log = workdir / "data", workdir / "server.log"
    as_root = ["--user=root"] if os.geteuid() == 0 else []
    setup = subprocess.run(
        [install, "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
         "--skip-test-db", *as_root],
        capture_output=True, text=True,
    )
    if setup.returncode != 0:
        raise RuntimeError(f"{install} failed:\n{(setup.stdout + setup.stderr)[-2000:]}")
    port = _free_port()
    proc = subprocess.Popen(
        [server, "--no-defaults", f"--datadir={data}", f"--socket={workdir / 'mysqld.sock'}",
         f"--port={port}", "--bind-address=127.0.0.1", f"--pid-file={workdir / 'mysqld.pid'}",
         f"--log-error={log}", "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
         "--innodb-buffer-pool-size=64M", *as_root],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise RuntimeError(f"{server} exited with status {proc.returncode}:\n{tail}")
            try:
                pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=2).close()
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"MariaDB did not accept connections within {timeout:.0f} s") from None
                time.sleep(0.2)
        yield f"mysql://root@127.0.0.1:{port}/"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if owned_tmp:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["serve"]:
        print("usage: python -m booktools.sql serve   (start a throwaway MariaDB until Ctrl-C)")
        return 2
    def stop(signum, frame):
        raise KeyboardInterrupt  # SIGTERM stops the server as cleanly as Ctrl-C

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)  # also when started in the background, where SIGINT is ignored
    with throwaway_mariadb() as url:
        print(f"MariaDB is running. In another shell:\n    export {URL_ENV}={url}\nCtrl-C stops it.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0
