from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DECISION_KIND_CHECK: DecisionKind
DECISION_KIND_COMPLETE: DecisionKind
DECISION_KIND_REDEEM: DecisionKind
DECISION_KIND_UNSPECIFIED: DecisionKind
DESCRIPTOR: _descriptor.FileDescriptor
OUTCOME_ALLOW: Outcome
OUTCOME_DUPLICATE: Outcome
OUTCOME_IGNORED: Outcome
OUTCOME_REFUSE: Outcome
OUTCOME_UNSPECIFIED: Outcome
REASON_ACTION_MISMATCH: Reason
REASON_AGENT_SPOKE_AFTER: Reason
REASON_ALREADY_REDEEMED: Reason
REASON_APPROVAL_EXPIRED: Reason
REASON_APPROVAL_INVALID: Reason
REASON_APPROVAL_MISMATCH: Reason
REASON_ARGUMENT_MISMATCH: Reason
REASON_CALLER_SPEAKING: Reason
REASON_COMPLETED: Reason
REASON_CONFIRMED: Reason
REASON_DUPLICATE: Reason
REASON_EVIDENCE_USED: Reason
REASON_EXPLICIT_INSTRUCTION: Reason
REASON_FAILED: Reason
REASON_INTERNAL: Reason
REASON_NEGATED: Reason
REASON_NOT_PLAIN: Reason
REASON_NOT_REQUIRED: Reason
REASON_NO_ANSWER: Reason
REASON_NO_QUESTION: Reason
REASON_QUANTITY_REPEAT: Reason
REASON_QUESTION_NOT_PLAIN: Reason
REASON_REDEEMED: Reason
REASON_STALE: Reason
REASON_TRANSCRIPT_GAP: Reason
REASON_TRANSCRIPT_UNAVAILABLE: Reason
REASON_UNKNOWN_CALL: Reason
REASON_UNSPECIFIED: Reason
REASON_UNSUPPORTED_LANGUAGE: Reason

class Ask(_message.Message):
    __slots__ = ["expires_at", "id", "lang", "text"]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LANG_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    expires_at: _timestamp_pb2.Timestamp
    id: str
    lang: str
    text: str
    def __init__(self, text: _Optional[str] = ..., lang: _Optional[str] = ..., id: _Optional[str] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ["args", "call_id", "include_evidence", "responding_to_ms", "response_id", "tool", "tool_call_id", "wait_ms"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    RESPONDING_TO_MS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    args: _struct_pb2.Struct
    call_id: str
    include_evidence: bool
    responding_to_ms: int
    response_id: str
    tool: str
    tool_call_id: str
    wait_ms: int
    def __init__(self, call_id: _Optional[str] = ..., tool: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., response_id: _Optional[str] = ..., responding_to_ms: _Optional[int] = ..., tool_call_id: _Optional[str] = ..., include_evidence: bool = ..., wait_ms: _Optional[int] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ["answer_text", "approval", "approval_expires_at", "ask", "decision_id", "detail", "evidence", "message", "original_decision_id", "original_result", "original_running", "outcome", "question_sentence", "reason", "waited_ms"]
    ANSWER_TEXT_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_RESULT_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_RUNNING_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    QUESTION_SENTENCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WAITED_MS_FIELD_NUMBER: _ClassVar[int]
    answer_text: str
    approval: str
    approval_expires_at: _timestamp_pb2.Timestamp
    ask: Ask
    decision_id: str
    detail: str
    evidence: Evidence
    message: str
    original_decision_id: str
    original_result: _struct_pb2.Struct
    original_running: bool
    outcome: Outcome
    question_sentence: str
    reason: Reason
    waited_ms: int
    def __init__(self, decision_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., evidence: _Optional[_Union[Evidence, _Mapping]] = ..., original_decision_id: _Optional[str] = ..., original_result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., waited_ms: _Optional[int] = ..., approval: _Optional[str] = ..., approval_expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., question_sentence: _Optional[str] = ..., answer_text: _Optional[str] = ..., detail: _Optional[str] = ..., original_running: bool = ..., ask: _Optional[_Union[Ask, _Mapping]] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ["approval", "decision_id", "failed", "receipt", "result"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    approval: str
    decision_id: str
    failed: bool
    receipt: str
    result: _struct_pb2.Struct
    def __init__(self, decision_id: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., failed: bool = ..., approval: _Optional[str] = ..., receipt: _Optional[str] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ["decision_id"]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    decision_id: str
    def __init__(self, decision_id: _Optional[str] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ["approval_expires_at", "approval_key_id", "args", "args_hash", "call_id", "decision_id", "evidence", "kind", "message", "original_decision_id", "outcome", "policy_version", "reason", "replica", "response_id", "result", "time", "tool", "tool_call_id", "waited_ms"]
    APPROVAL_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ARGS_HASH_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    WAITED_MS_FIELD_NUMBER: _ClassVar[int]
    approval_expires_at: _timestamp_pb2.Timestamp
    approval_key_id: str
    args: str
    args_hash: str
    call_id: str
    decision_id: str
    evidence: Evidence
    kind: DecisionKind
    message: str
    original_decision_id: str
    outcome: Outcome
    policy_version: str
    reason: Reason
    replica: str
    response_id: str
    result: str
    time: _timestamp_pb2.Timestamp
    tool: str
    tool_call_id: str
    waited_ms: int
    def __init__(self, decision_id: _Optional[str] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., call_id: _Optional[str] = ..., tool: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., response_id: _Optional[str] = ..., args_hash: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., evidence: _Optional[_Union[Evidence, _Mapping]] = ..., waited_ms: _Optional[int] = ..., policy_version: _Optional[str] = ..., original_decision_id: _Optional[str] = ..., args: _Optional[str] = ..., kind: _Optional[_Union[DecisionKind, str]] = ..., approval_key_id: _Optional[str] = ..., approval_expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., replica: _Optional[str] = ..., result: _Optional[str] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ["answer", "detail", "guard_question", "lang", "matches", "question", "question_sentence", "recent_turns"]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    GUARD_QUESTION_FIELD_NUMBER: _ClassVar[int]
    LANG_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    QUESTION_SENTENCE_FIELD_NUMBER: _ClassVar[int]
    RECENT_TURNS_FIELD_NUMBER: _ClassVar[int]
    answer: Turn
    detail: str
    guard_question: str
    lang: str
    matches: _containers.RepeatedCompositeFieldContainer[Match]
    question: Turn
    question_sentence: str
    recent_turns: _containers.RepeatedCompositeFieldContainer[Turn]
    def __init__(self, question: _Optional[_Union[Turn, _Mapping]] = ..., question_sentence: _Optional[str] = ..., answer: _Optional[_Union[Turn, _Mapping]] = ..., matches: _Optional[_Iterable[_Union[Match, _Mapping]]] = ..., recent_turns: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ..., lang: _Optional[str] = ..., detail: _Optional[str] = ..., guard_question: _Optional[str] = ...) -> None: ...

class ListDecisionsRequest(_message.Message):
    __slots__ = ["call_id", "include_events", "include_transcript", "page_size", "page_token"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TRANSCRIPT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    include_events: bool
    include_transcript: bool
    page_size: int
    page_token: str
    def __init__(self, call_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_transcript: bool = ..., include_events: bool = ...) -> None: ...

class ListDecisionsResponse(_message.Message):
    __slots__ = ["decisions", "events", "next_page_token", "transcript"]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TRANSCRIPT_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[Decision]
    events: _containers.RepeatedCompositeFieldContainer[ReceivedEvent]
    next_page_token: str
    transcript: _containers.RepeatedCompositeFieldContainer[Turn]
    def __init__(self, decisions: _Optional[_Iterable[_Union[Decision, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., transcript: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[ReceivedEvent, _Mapping]]] = ...) -> None: ...

class Match(_message.Message):
    __slots__ = ["pattern", "rule", "text"]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    rule: str
    text: str
    def __init__(self, rule: _Optional[str] = ..., pattern: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class PublishTranscriptRequest(_message.Message):
    __slots__ = ["events", "guard_sequenced"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    GUARD_SEQUENCED_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[TranscriptEvent]
    guard_sequenced: bool
    def __init__(self, events: _Optional[_Iterable[_Union[TranscriptEvent, _Mapping]]] = ..., guard_sequenced: bool = ...) -> None: ...

class PublishTranscriptResponse(_message.Message):
    __slots__ = ["events"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[PublishedTranscriptEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[PublishedTranscriptEvent, _Mapping]]] = ...) -> None: ...

class PublishedTranscriptEvent(_message.Message):
    __slots__ = ["duplicate", "epoch", "seq", "source", "stream_seq"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STREAM_SEQ_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    epoch: int
    seq: int
    source: str
    stream_seq: int
    def __init__(self, source: _Optional[str] = ..., epoch: _Optional[int] = ..., seq: _Optional[int] = ..., stream_seq: _Optional[int] = ..., duplicate: bool = ...) -> None: ...

class ReceivedEvent(_message.Message):
    __slots__ = ["event", "received_at"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    event: TranscriptEvent
    received_at: _timestamp_pb2.Timestamp
    def __init__(self, event: _Optional[_Union[TranscriptEvent, _Mapping]] = ..., received_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RedeemRequest(_message.Message):
    __slots__ = ["approval", "args", "call_id", "tool"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    approval: str
    args: _struct_pb2.Struct
    call_id: str
    tool: str
    def __init__(self, approval: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tool: _Optional[str] = ..., call_id: _Optional[str] = ...) -> None: ...

class RedeemResponse(_message.Message):
    __slots__ = ["allowed_decision_id", "args_hash", "call_id", "decision_id", "expires_at", "message", "outcome", "reason", "receipt", "tool"]
    ALLOWED_DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    ARGS_HASH_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    allowed_decision_id: str
    args_hash: str
    call_id: str
    decision_id: str
    expires_at: _timestamp_pb2.Timestamp
    message: str
    outcome: Outcome
    reason: Reason
    receipt: str
    tool: str
    def __init__(self, decision_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., allowed_decision_id: _Optional[str] = ..., call_id: _Optional[str] = ..., tool: _Optional[str] = ..., args_hash: _Optional[str] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., receipt: _Optional[str] = ...) -> None: ...

class TranscriptEvent(_message.Message):
    __slots__ = ["call_id", "confidence", "end_ms", "epoch", "final", "interrupted", "lang", "response_id", "seq", "source", "speaker", "start_ms", "text", "type"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    LANG_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    confidence: float
    end_ms: int
    epoch: int
    final: bool
    interrupted: bool
    lang: str
    response_id: str
    seq: int
    source: str
    speaker: str
    start_ms: int
    text: str
    type: str
    def __init__(self, call_id: _Optional[str] = ..., seq: _Optional[int] = ..., speaker: _Optional[str] = ..., type: _Optional[str] = ..., text: _Optional[str] = ..., final: bool = ..., start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ..., lang: _Optional[str] = ..., response_id: _Optional[str] = ..., interrupted: bool = ..., confidence: _Optional[float] = ..., source: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ["end_ms", "first_seq", "interrupted", "lang", "last_seq", "received_at", "response_id", "source", "speaker", "start_ms", "text"]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQ_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    LANG_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    end_ms: int
    first_seq: int
    interrupted: bool
    lang: str
    last_seq: int
    received_at: _timestamp_pb2.Timestamp
    response_id: str
    source: str
    speaker: str
    start_ms: int
    text: str
    def __init__(self, speaker: _Optional[str] = ..., text: _Optional[str] = ..., start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ..., first_seq: _Optional[int] = ..., last_seq: _Optional[int] = ..., lang: _Optional[str] = ..., response_id: _Optional[str] = ..., interrupted: bool = ..., received_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ...) -> None: ...

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DecisionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
