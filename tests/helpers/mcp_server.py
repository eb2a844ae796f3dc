"""A small MCP server for the tool tests, run as `python tests/helpers/mcp_server.py` (stdio).

Its tools cover what a client has to survive: plain answers (add, echo, pid), a tool error
(fail), a slow tool that leaves the server responsive (sleep), one that blocks the whole
server (freeze), one that kills it (crash) and one that answers with megabytes (big).
`--exit-at-start` makes it die before the handshake, as a misconfigured server does.
`--describe TEXT` adds a tool `described` whose description is TEXT (what any server may
say about its tools).

`--http TOKEN` serves streamable HTTP on 127.0.0.1 instead, to clients that send
`Authorization: Bearer TOKEN`; the first line it prints is its port (it is listening by then).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build(name: str, description: str = "") -> MCPServer:
    server: MCPServer = MCPServer(name)

    if description:
        @server.tool(description=description)
        def described() -> str:
            return "described"

    @server.tool(description="Add two numbers.")
    def add(a: float, b: float) -> float:
        return a + b

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="The id of this server's process.")
    def pid() -> int:
        return os.getpid()

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        raise ToolError(reason)  # reported to the client, unlike an unexpected exception

    @server.tool(description="Answer after a while; the server keeps serving meanwhile.")
    async def sleep(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "slept"

    @server.tool(description="Block the whole server for a while.")
    async def freeze(seconds: float) -> str:
        time.sleep(seconds)  # on the event loop on purpose: the server stops answering pings
        return "thawed"

    @server.tool(description="A result of this many megabytes of text.")
    def big(megabytes: float) -> str:
        line = "All work and no play makes Jack a dull boy. " * 23 + "\n"  # ~1 KB
        return line * int(megabytes * 1024)

    @server.tool(description="Kill the server.")
    def crash() -> str:
        print("crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)

    return server


def serve_http(server: MCPServer, token: str) -> None:
    import uvicorn

    app = server.streamable_http_app()
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"no token"})
            return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="test-tools")
    parser.add_argument("--exit-at-start", action="store_true")
    parser.add_argument("--http", metavar="TOKEN")
    parser.add_argument("--describe", default="", metavar="TEXT")
    args = parser.parse_args()
    if args.exit_at_start:
        print("refusing to start", file=sys.stderr, flush=True)
        sys.exit(2)
    if args.http:
        serve_http(build(args.name, args.describe), args.http)
    else:
        build(args.name, args.describe).run()


if __name__ == "__main__":
    main()
