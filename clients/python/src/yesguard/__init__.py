"""yesguard for Python pipelines: publish the transcript to the guard over
gRPC, check each consequential tool call, guard tool functions, and verify
approvals in a backend.

The core needs only grpcio and protobuf. yesguard.approval needs
cryptography; yesguard.pipecat and yesguard.livekit need their framework
only for the frame and event types they read.
"""

from ._client import (
    DEFAULT_TIMEOUTS,
    GUARD_SERVICE,
    TLS,
    Ask,
    CheckResult,
    DecisionPage,
    Guard,
    RedeemResult,
    YesguardProtocolError,
)
from ._guard_tool import UNAVAILABLE_MESSAGE, asked_message, guard_tool
from ._json import JsonObject, YesguardInputError
from ._publisher import PublishedEvent, TranscriptPublisher

__version__ = "0.1.0"

__all__ = [
    "Ask",
    "asked_message",
    "CheckResult",
    "DecisionPage",
    "DEFAULT_TIMEOUTS",
    "Guard",
    "GUARD_SERVICE",
    "JsonObject",
    "PublishedEvent",
    "RedeemResult",
    "TLS",
    "TranscriptPublisher",
    "UNAVAILABLE_MESSAGE",
    "YesguardInputError",
    "YesguardProtocolError",
    "guard_tool",
]
