from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuthorizedInfo(_message.Message):
    __slots__ = ["authAuthorizedToken", "visitAuthorizedToken"]
    AUTHAUTHORIZEDTOKEN_FIELD_NUMBER: _ClassVar[int]
    VISITAUTHORIZEDTOKEN_FIELD_NUMBER: _ClassVar[int]
    authAuthorizedToken: str
    visitAuthorizedToken: int
    def __init__(self, visitAuthorizedToken: _Optional[int] = ..., authAuthorizedToken: _Optional[str] = ...) -> None: ...

class CommitOffsetRequestC2B(_message.Message):
    __slots__ = ["clientId", "groupName", "lastPackConsumed", "partitionId", "topicName"]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    LASTPACKCONSUMED_FIELD_NUMBER: _ClassVar[int]
    PARTITIONID_FIELD_NUMBER: _ClassVar[int]
    TOPICNAME_FIELD_NUMBER: _ClassVar[int]
    clientId: str
    groupName: str
    lastPackConsumed: bool
    partitionId: int
    topicName: str
    def __init__(self, clientId: _Optional[str] = ..., topicName: _Optional[str] = ..., partitionId: _Optional[int] = ..., groupName: _Optional[str] = ..., lastPackConsumed: bool = ...) -> None: ...

class CommitOffsetResponseB2C(_message.Message):
    __slots__ = ["currOffset", "errCode", "errMsg", "maxOffset", "success"]
    CURROFFSET_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    MAXOFFSET_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    currOffset: int
    errCode: int
    errMsg: str
    maxOffset: int
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., currOffset: _Optional[int] = ..., maxOffset: _Optional[int] = ...) -> None: ...

class GetMessageRequestC2B(_message.Message):
    __slots__ = ["clientId", "escFlowCtrl", "groupName", "lastPackConsumed", "manualCommitOffset", "partitionId", "topicName"]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    ESCFLOWCTRL_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    LASTPACKCONSUMED_FIELD_NUMBER: _ClassVar[int]
    MANUALCOMMITOFFSET_FIELD_NUMBER: _ClassVar[int]
    PARTITIONID_FIELD_NUMBER: _ClassVar[int]
    TOPICNAME_FIELD_NUMBER: _ClassVar[int]
    clientId: str
    escFlowCtrl: bool
    groupName: str
    lastPackConsumed: bool
    manualCommitOffset: bool
    partitionId: int
    topicName: str
    def __init__(self, clientId: _Optional[str] = ..., partitionId: _Optional[int] = ..., groupName: _Optional[str] = ..., topicName: _Optional[str] = ..., lastPackConsumed: bool = ..., manualCommitOffset: bool = ..., escFlowCtrl: bool = ...) -> None: ...

class GetMessageResponseB2C(_message.Message):
    __slots__ = ["currDataDlt", "currOffset", "errCode", "errMsg", "escFlowCtrl", "maxOffset", "messages", "minLimitTime", "requireSlow", "success"]
    CURRDATADLT_FIELD_NUMBER: _ClassVar[int]
    CURROFFSET_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    ESCFLOWCTRL_FIELD_NUMBER: _ClassVar[int]
    MAXOFFSET_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MINLIMITTIME_FIELD_NUMBER: _ClassVar[int]
    REQUIRESLOW_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    currDataDlt: int
    currOffset: int
    errCode: int
    errMsg: str
    escFlowCtrl: bool
    maxOffset: int
    messages: _containers.RepeatedCompositeFieldContainer[TransferedMessage]
    minLimitTime: int
    requireSlow: bool
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[TransferedMessage, _Mapping]]] = ..., currOffset: _Optional[int] = ..., minLimitTime: _Optional[int] = ..., escFlowCtrl: bool = ..., currDataDlt: _Optional[int] = ..., requireSlow: bool = ..., maxOffset: _Optional[int] = ...) -> None: ...

class HeartBeatRequestC2B(_message.Message):
    __slots__ = ["authInfo", "clientId", "groupName", "partitionInfo", "qryPriorityId", "readStatus", "ssdStoreId"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONINFO_FIELD_NUMBER: _ClassVar[int]
    QRYPRIORITYID_FIELD_NUMBER: _ClassVar[int]
    READSTATUS_FIELD_NUMBER: _ClassVar[int]
    SSDSTOREID_FIELD_NUMBER: _ClassVar[int]
    authInfo: AuthorizedInfo
    clientId: str
    groupName: str
    partitionInfo: _containers.RepeatedScalarFieldContainer[str]
    qryPriorityId: int
    readStatus: int
    ssdStoreId: int
    def __init__(self, clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., readStatus: _Optional[int] = ..., partitionInfo: _Optional[_Iterable[str]] = ..., ssdStoreId: _Optional[int] = ..., qryPriorityId: _Optional[int] = ..., authInfo: _Optional[_Union[AuthorizedInfo, _Mapping]] = ...) -> None: ...

class HeartBeatResponseB2C(_message.Message):
    __slots__ = ["errCode", "errMsg", "failureInfo", "hasPartFailure", "requireAuth", "success"]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    FAILUREINFO_FIELD_NUMBER: _ClassVar[int]
    HASPARTFAILURE_FIELD_NUMBER: _ClassVar[int]
    REQUIREAUTH_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    errCode: int
    errMsg: str
    failureInfo: _containers.RepeatedScalarFieldContainer[str]
    hasPartFailure: bool
    requireAuth: bool
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., hasPartFailure: bool = ..., failureInfo: _Optional[_Iterable[str]] = ..., requireAuth: bool = ...) -> None: ...

class RegisterRequestC2B(_message.Message):
    __slots__ = ["authInfo", "clientId", "currOffset", "filterCondStr", "groupName", "opType", "partitionId", "qryPriorityId", "readStatus", "sessionKey", "sessionTime", "ssdStoreId", "topicName"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    CURROFFSET_FIELD_NUMBER: _ClassVar[int]
    FILTERCONDSTR_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    OPTYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONID_FIELD_NUMBER: _ClassVar[int]
    QRYPRIORITYID_FIELD_NUMBER: _ClassVar[int]
    READSTATUS_FIELD_NUMBER: _ClassVar[int]
    SESSIONKEY_FIELD_NUMBER: _ClassVar[int]
    SESSIONTIME_FIELD_NUMBER: _ClassVar[int]
    SSDSTOREID_FIELD_NUMBER: _ClassVar[int]
    TOPICNAME_FIELD_NUMBER: _ClassVar[int]
    authInfo: AuthorizedInfo
    clientId: str
    currOffset: int
    filterCondStr: _containers.RepeatedScalarFieldContainer[str]
    groupName: str
    opType: int
    partitionId: int
    qryPriorityId: int
    readStatus: int
    sessionKey: str
    sessionTime: int
    ssdStoreId: int
    topicName: str
    def __init__(self, opType: _Optional[int] = ..., clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., topicName: _Optional[str] = ..., partitionId: _Optional[int] = ..., readStatus: _Optional[int] = ..., filterCondStr: _Optional[_Iterable[str]] = ..., currOffset: _Optional[int] = ..., sessionKey: _Optional[str] = ..., sessionTime: _Optional[int] = ..., ssdStoreId: _Optional[int] = ..., qryPriorityId: _Optional[int] = ..., authInfo: _Optional[_Union[AuthorizedInfo, _Mapping]] = ...) -> None: ...

class RegisterResponseB2C(_message.Message):
    __slots__ = ["currOffset", "errCode", "errMsg", "maxOffset", "success"]
    CURROFFSET_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    MAXOFFSET_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    currOffset: int
    errCode: int
    errMsg: str
    maxOffset: int
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., currOffset: _Optional[int] = ..., maxOffset: _Optional[int] = ...) -> None: ...

class SendMessageRequestP2B(_message.Message):
    __slots__ = ["authInfo", "checkSum", "clientId", "data", "flag", "msgTime", "msgType", "partitionId", "sentAddr", "topicName"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    MSGTIME_FIELD_NUMBER: _ClassVar[int]
    MSGTYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONID_FIELD_NUMBER: _ClassVar[int]
    SENTADDR_FIELD_NUMBER: _ClassVar[int]
    TOPICNAME_FIELD_NUMBER: _ClassVar[int]
    authInfo: AuthorizedInfo
    checkSum: int
    clientId: str
    data: bytes
    flag: int
    msgTime: str
    msgType: str
    partitionId: int
    sentAddr: int
    topicName: str
    def __init__(self, clientId: _Optional[str] = ..., topicName: _Optional[str] = ..., partitionId: _Optional[int] = ..., data: _Optional[bytes] = ..., flag: _Optional[int] = ..., checkSum: _Optional[int] = ..., sentAddr: _Optional[int] = ..., msgType: _Optional[str] = ..., msgTime: _Optional[str] = ..., authInfo: _Optional[_Union[AuthorizedInfo, _Mapping]] = ...) -> None: ...

class SendMessageResponseB2P(_message.Message):
    __slots__ = ["appendOffset", "appendTime", "errCode", "errMsg", "messageId", "requireAuth", "success"]
    APPENDOFFSET_FIELD_NUMBER: _ClassVar[int]
    APPENDTIME_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    MESSAGEID_FIELD_NUMBER: _ClassVar[int]
    REQUIREAUTH_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    appendOffset: int
    appendTime: int
    errCode: int
    errMsg: str
    messageId: int
    requireAuth: bool
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., requireAuth: bool = ..., messageId: _Optional[int] = ..., appendTime: _Optional[int] = ..., appendOffset: _Optional[int] = ...) -> None: ...

class TransferedMessage(_message.Message):
    __slots__ = ["checkSum", "flag", "messageId", "payLoadData"]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    MESSAGEID_FIELD_NUMBER: _ClassVar[int]
    PAYLOADDATA_FIELD_NUMBER: _ClassVar[int]
    checkSum: int
    flag: int
    messageId: int
    payLoadData: bytes
    def __init__(self, messageId: _Optional[int] = ..., checkSum: _Optional[int] = ..., payLoadData: _Optional[bytes] = ..., flag: _Optional[int] = ...) -> None: ...
