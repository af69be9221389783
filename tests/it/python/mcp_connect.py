"""The official Python MCP SDK drives `gatehouse connect` (issue 46).

Run as: python mcp_connect.py GATEHOUSE SOCKET UID
Starts `gatehouse connect --socket SOCKET` as the account UID (setpriv) as
its stdio server, initializes, lists the tools, calls `hello`, and prints
one JSON line: the server's name, the tools and the call's result.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


async def main() -> None:
    gatehouse, socket, uid = sys.argv[1], sys.argv[2], sys.argv[3]
    params = StdioServerParameters(
        command="setpriv",
        args=[
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--",
            gatehouse,
            "connect",
            "--socket",
            socket,
        ],
        cwd="/",
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool("hello", {"from": "python"})
            print(
                json.dumps(
                    {
                        "server": init.server_info.name
                        if hasattr(init, "server_info")
                        else init.serverInfo.name,
                        "tools": [t.name for t in tools.tools],
                        "result": result.model_dump(mode="json", by_alias=True),
                    }
                )
            )


asyncio.run(main())
