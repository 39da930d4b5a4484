from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RequestBody(_message.Message):
    __slots__ = ["method", "request", "timeout"]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    method: int
    request: bytes
    timeout: int
    def __init__(self, method: _Optional[int] = ..., timeout: _Optional[int] = ..., request: _Optional[bytes] = ...) -> None: ...

class RequestHeader(_message.Message):
    __slots__ = ["protocolVer", "serviceType"]
    PROTOCOLVER_FIELD_NUMBER: _ClassVar[int]
    SERVICETYPE_FIELD_NUMBER: _ClassVar[int]
    protocolVer: int
    serviceType: int
    def __init__(self, serviceType: _Optional[int] = ..., protocolVer: _Optional[int] = ...) -> None: ...

class ResponseHeader(_message.Message):
    __slots__ = ["protocolVer", "serviceType", "status"]
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ERROR: ResponseHeader.Status
    FATAL: ResponseHeader.Status
    PROTOCOLVER_FIELD_NUMBER: _ClassVar[int]
    SERVICETYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUCCESS: ResponseHeader.Status
    protocolVer: int
    serviceType: int
    status: ResponseHeader.Status
    def __init__(self, status: _Optional[_Union[ResponseHeader.Status, str]] = ..., serviceType: _Optional[int] = ..., protocolVer: _Optional[int] = ...) -> None: ...

class RpcConnHeader(_message.Message):
    __slots__ = ["flag", "parentId", "spanId", "traceId"]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    PARENTID_FIELD_NUMBER: _ClassVar[int]
    SPANID_FIELD_NUMBER: _ClassVar[int]
    TRACEID_FIELD_NUMBER: _ClassVar[int]
    flag: int
    parentId: int
    spanId: int
    traceId: int
    def __init__(self, flag: _Optional[int] = ..., traceId: _Optional[int] = ..., spanId: _Optional[int] = ..., parentId: _Optional[int] = ...) -> None: ...

class RspExceptionBody(_message.Message):
    __slots__ = ["exceptionName", "stackTrace"]
    EXCEPTIONNAME_FIELD_NUMBER: _ClassVar[int]
    STACKTRACE_FIELD_NUMBER: _ClassVar[int]
    exceptionName: str
    stackTrace: str
    def __init__(self, exceptionName: _Optional[str] = ..., stackTrace: _Optional[str] = ...) -> None: ...

class RspResponseBody(_message.Message):
    __slots__ = ["data", "method"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    method: int
    def __init__(self, method: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
