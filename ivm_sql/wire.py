"""The messages between ``ivm`` (``ivm_sql.client``) and the project's server
(``ivm_sql.host``) over the server's Unix socket: JSON objects, each after its length.

The client sends one request, ``{"token", "argv", "stdout_tty", "stderr_tty", "columns",
"environ"}``, then, whenever the user interrupts it, ``{"signal": "SIGINT"}`` (or
``SIGTERM``). The server answers ``{"refused": message}`` and closes, or streams
``{"out": text}`` and ``{"err": text}`` and ends with ``{"exit": code}``.
"""

from __future__ import annotations

import json
import socket
import struct

HEADER = struct.Struct(">I")
LARGEST = 64 * 2**20  # no message of ivm's comes near it: a larger length is not ours


class WireError(Exception):
    """The other end sent something that is not a message of this protocol."""


def send(connection: socket.socket, message: dict) -> None:
    data = json.dumps(message).encode("utf-8")
    connection.sendall(HEADER.pack(len(data)) + data)


def receive(connection: socket.socket) -> dict | None:
    """The next message; None when the other end closed the connection between messages."""
    header = _exactly(connection, HEADER.size)
    if header is None:
        return None
    (length,) = HEADER.unpack(header)
    if length > LARGEST:
        raise WireError(f"a message of {length} bytes")
    data = _exactly(connection, length)
    if data is None:
        raise WireError("the connection closed inside a message")
    try:
        message = json.loads(data)
    except ValueError as error:
        raise WireError(f"not JSON: {error}") from None
    if not isinstance(message, dict):
        raise WireError("not a JSON object")
    return message


def _exactly(connection: socket.socket, size: int) -> bytes | None:
    chunks, received = [], 0
    while received < size:
        chunk = connection.recv(size - received)
        if not chunk:
            if received:
                raise WireError("the connection closed inside a message")
            return None
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)
