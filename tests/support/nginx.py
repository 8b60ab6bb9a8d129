"""A real nginx (Debian's package) as the gateway between two taps, started by the tests."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import port_open, process
from wirecheck.record import free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def nginx_available() -> bool:
    return Path(NGINX).exists()


@contextlib.contextmanager
def nginx_gateway(upstream: str, *, buffering: bool, extra: str = "") -> Iterator[str]:
    """nginx on a free loopback port, proxying to ``upstream`` (http://127.0.0.1:PORT)."""
    if not nginx_available():
        raise RuntimeError(
            "nginx is not installed: run `apt-get update && apt-get install -y nginx-light` (./dev test does)"
        )
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="wc-nginx-") as tmp:
        Path(tmp).chmod(0o777)
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(
            f"""
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass {upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering {"on" if buffering else "off"};
      proxy_read_timeout 60s;
      {extra}
    }}
  }}
}}
"""
        )
        with process(
            [NGINX, "-c", str(conf), "-g", "daemon off;", "-e", f"{tmp}/error.log"],
            ready=port_open(port),
            ready_s=10,
            logs=Path(tmp) / "nginx",
        ):
            yield f"http://127.0.0.1:{port}"
