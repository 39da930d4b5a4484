from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApprovedClientConfig(_message.Message):
    __slots__ = ["configId", "maxMsgSize"]
    CONFIGID_FIELD_NUMBER: _ClassVar[int]
    MAXMSGSIZE_FIELD_NUMBER: _ClassVar[int]
    configId: int
    maxMsgSize: int
    def __init__(self, configId: _Optional[int] = ..., maxMsgSize: _Optional[int] = ...) -> None: ...

class AuthenticateInfo(_message.Message):
    __slots__ = ["nonce", "othParams", "signature", "timestamp", "userName"]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    OTHPARAMS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    othParams: str
    signature: str
    timestamp: int
    userName: str
    def __init__(self, userName: _Optional[str] = ..., timestamp: _Optional[int] = ..., nonce: _Optional[int] = ..., othParams: _Optional[str] = ..., signature: _Optional[str] = ...) -> None: ...

class ClientSubRepInfo(_message.Message):
    __slots__ = ["brokerConfigId", "lstAssignedTime", "partSubInfo", "reportSubInfo", "topicMetaInfoId"]
    BROKERCONFIGID_FIELD_NUMBER: _ClassVar[int]
    LSTASSIGNEDTIME_FIELD_NUMBER: _ClassVar[int]
    PARTSUBINFO_FIELD_NUMBER: _ClassVar[int]
    REPORTSUBINFO_FIELD_NUMBER: _ClassVar[int]
    TOPICMETAINFOID_FIELD_NUMBER: _ClassVar[int]
    brokerConfigId: int
    lstAssignedTime: int
    partSubInfo: _containers.RepeatedScalarFieldContainer[str]
    reportSubInfo: bool
    topicMetaInfoId: int
    def __init__(self, brokerConfigId: _Optional[int] = ..., topicMetaInfoId: _Optional[int] = ..., lstAssignedTime: _Optional[int] = ..., reportSubInfo: bool = ..., partSubInfo: _Optional[_Iterable[str]] = ...) -> None: ...

class CloseRequestC2M(_message.Message):
    __slots__ = ["authInfo", "clientId", "groupName"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    authInfo: MasterCertificateInfo
    clientId: str
    groupName: str
    def __init__(self, clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ...) -> None: ...

class CloseRequestP2M(_message.Message):
    __slots__ = ["authInfo", "clientId"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    authInfo: MasterCertificateInfo
    clientId: str
    def __init__(self, clientId: _Optional[str] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ...) -> None: ...

class CloseResponseM2C(_message.Message):
    __slots__ = ["errCode", "errMsg", "success"]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    errCode: int
    errMsg: str
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ...) -> None: ...

class CloseResponseM2P(_message.Message):
    __slots__ = ["errCode", "errMsg", "success"]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    errCode: int
    errMsg: str
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ...) -> None: ...

class EventProto(_message.Message):
    __slots__ = ["opType", "rebalanceId", "status", "subscribeInfo"]
    OPTYPE_FIELD_NUMBER: _ClassVar[int]
    REBALANCEID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBEINFO_FIELD_NUMBER: _ClassVar[int]
    opType: int
    rebalanceId: int
    status: int
    subscribeInfo: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rebalanceId: _Optional[int] = ..., opType: _Optional[int] = ..., status: _Optional[int] = ..., subscribeInfo: _Optional[_Iterable[str]] = ...) -> None: ...

class GetPartMetaRequestC2M(_message.Message):
    __slots__ = ["authInfo", "brokerConfigId", "clientId", "groupName", "topicMetaInfoId"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    BROKERCONFIGID_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    TOPICMETAINFOID_FIELD_NUMBER: _ClassVar[int]
    authInfo: MasterCertificateInfo
    brokerConfigId: int
    clientId: str
    groupName: str
    topicMetaInfoId: int
    def __init__(self, clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., brokerConfigId: _Optional[int] = ..., topicMetaInfoId: _Optional[int] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ...) -> None: ...

class GetPartMetaResponseM2C(_message.Message):
    __slots__ = ["brokerConfigId", "brokerConfigList", "errCode", "errMsg", "topicMetaInfoId", "topicMetaInfoList"]
    BROKERCONFIGID_FIELD_NUMBER: _ClassVar[int]
    BROKERCONFIGLIST_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    TOPICMETAINFOID_FIELD_NUMBER: _ClassVar[int]
    TOPICMETAINFOLIST_FIELD_NUMBER: _ClassVar[int]
    brokerConfigId: int
    brokerConfigList: _containers.RepeatedScalarFieldContainer[str]
    errCode: int
    errMsg: str
    topicMetaInfoId: int
    topicMetaInfoList: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., brokerConfigId: _Optional[int] = ..., topicMetaInfoId: _Optional[int] = ..., topicMetaInfoList: _Optional[_Iterable[str]] = ..., brokerConfigList: _Optional[_Iterable[str]] = ...) -> None: ...

class HeartRequestC2M(_message.Message):
    __slots__ = ["authInfo", "clientId", "defFlowCheckId", "event", "groupFlowCheckId", "groupName", "qryPriorityId", "reportSubscribeInfo", "ssdStoreId", "subscribeInfo"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    QRYPRIORITYID_FIELD_NUMBER: _ClassVar[int]
    REPORTSUBSCRIBEINFO_FIELD_NUMBER: _ClassVar[int]
    SSDSTOREID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBEINFO_FIELD_NUMBER: _ClassVar[int]
    authInfo: MasterCertificateInfo
    clientId: str
    defFlowCheckId: int
    event: EventProto
    groupFlowCheckId: int
    groupName: str
    qryPriorityId: int
    reportSubscribeInfo: bool
    ssdStoreId: int
    subscribeInfo: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., subscribeInfo: _Optional[_Iterable[str]] = ..., reportSubscribeInfo: bool = ..., event: _Optional[_Union[EventProto, _Mapping]] = ..., defFlowCheckId: _Optional[int] = ..., groupFlowCheckId: _Optional[int] = ..., ssdStoreId: _Optional[int] = ..., qryPriorityId: _Optional[int] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ...) -> None: ...

class HeartRequestC2MV2(_message.Message):
    __slots__ = ["authInfo", "clientId", "groupName", "opsTaskInfo", "subRepInfo"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    OPSTASKINFO_FIELD_NUMBER: _ClassVar[int]
    SUBREPINFO_FIELD_NUMBER: _ClassVar[int]
    authInfo: MasterCertificateInfo
    clientId: str
    groupName: str
    opsTaskInfo: OpsTaskInfo
    subRepInfo: ClientSubRepInfo
    def __init__(self, clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., subRepInfo: _Optional[_Union[ClientSubRepInfo, _Mapping]] = ..., opsTaskInfo: _Optional[_Union[OpsTaskInfo, _Mapping]] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ...) -> None: ...

class HeartRequestP2M(_message.Message):
    __slots__ = ["appdConfig", "authInfo", "brokerCheckSum", "clientId", "hostName", "topicList"]
    APPDCONFIG_FIELD_NUMBER: _ClassVar[int]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    BROKERCHECKSUM_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    TOPICLIST_FIELD_NUMBER: _ClassVar[int]
    appdConfig: ApprovedClientConfig
    authInfo: MasterCertificateInfo
    brokerCheckSum: int
    clientId: str
    hostName: str
    topicList: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, clientId: _Optional[str] = ..., brokerCheckSum: _Optional[int] = ..., hostName: _Optional[str] = ..., topicList: _Optional[_Iterable[str]] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ..., appdConfig: _Optional[_Union[ApprovedClientConfig, _Mapping]] = ...) -> None: ...

class HeartResponseM2C(_message.Message):
    __slots__ = ["authorizedInfo", "defFlowCheckId", "defFlowControlInfo", "errCode", "errMsg", "event", "groupFlowCheckId", "groupFlowControlInfo", "notAllocated", "qryPriorityId", "requireAuth", "ssdStoreId", "success"]
    AUTHORIZEDINFO_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCONTROLINFO_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCONTROLINFO_FIELD_NUMBER: _ClassVar[int]
    NOTALLOCATED_FIELD_NUMBER: _ClassVar[int]
    QRYPRIORITYID_FIELD_NUMBER: _ClassVar[int]
    REQUIREAUTH_FIELD_NUMBER: _ClassVar[int]
    SSDSTOREID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    authorizedInfo: MasterAuthorizedInfo
    defFlowCheckId: int
    defFlowControlInfo: str
    errCode: int
    errMsg: str
    event: EventProto
    groupFlowCheckId: int
    groupFlowControlInfo: str
    notAllocated: bool
    qryPriorityId: int
    requireAuth: bool
    ssdStoreId: int
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., event: _Optional[_Union[EventProto, _Mapping]] = ..., notAllocated: bool = ..., defFlowCheckId: _Optional[int] = ..., defFlowControlInfo: _Optional[str] = ..., groupFlowCheckId: _Optional[int] = ..., groupFlowControlInfo: _Optional[str] = ..., ssdStoreId: _Optional[int] = ..., qryPriorityId: _Optional[int] = ..., requireAuth: bool = ..., authorizedInfo: _Optional[_Union[MasterAuthorizedInfo, _Mapping]] = ...) -> None: ...

class HeartResponseM2CV2(_message.Message):
    __slots__ = ["authorizedInfo", "brokerConfigId", "brokerConfigList", "errCode", "errMsg", "opsTaskInfo", "topicMetaInfoId", "topicMetaInfoList"]
    AUTHORIZEDINFO_FIELD_NUMBER: _ClassVar[int]
    BROKERCONFIGID_FIELD_NUMBER: _ClassVar[int]
    BROKERCONFIGLIST_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    OPSTASKINFO_FIELD_NUMBER: _ClassVar[int]
    TOPICMETAINFOID_FIELD_NUMBER: _ClassVar[int]
    TOPICMETAINFOLIST_FIELD_NUMBER: _ClassVar[int]
    authorizedInfo: MasterAuthorizedInfo
    brokerConfigId: int
    brokerConfigList: _containers.RepeatedScalarFieldContainer[str]
    errCode: int
    errMsg: str
    opsTaskInfo: OpsTaskInfo
    topicMetaInfoId: int
    topicMetaInfoList: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., brokerConfigId: _Optional[int] = ..., brokerConfigList: _Optional[_Iterable[str]] = ..., topicMetaInfoId: _Optional[int] = ..., topicMetaInfoList: _Optional[_Iterable[str]] = ..., opsTaskInfo: _Optional[_Union[OpsTaskInfo, _Mapping]] = ..., authorizedInfo: _Optional[_Union[MasterAuthorizedInfo, _Mapping]] = ...) -> None: ...

class HeartResponseM2P(_message.Message):
    __slots__ = ["appdConfig", "authorizedInfo", "brokerCheckSum", "brokerInfos", "errCode", "errMsg", "requireAuth", "success", "topicInfos"]
    APPDCONFIG_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZEDINFO_FIELD_NUMBER: _ClassVar[int]
    BROKERCHECKSUM_FIELD_NUMBER: _ClassVar[int]
    BROKERINFOS_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    REQUIREAUTH_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TOPICINFOS_FIELD_NUMBER: _ClassVar[int]
    appdConfig: ApprovedClientConfig
    authorizedInfo: MasterAuthorizedInfo
    brokerCheckSum: int
    brokerInfos: _containers.RepeatedScalarFieldContainer[str]
    errCode: int
    errMsg: str
    requireAuth: bool
    success: bool
    topicInfos: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., brokerCheckSum: _Optional[int] = ..., topicInfos: _Optional[_Iterable[str]] = ..., brokerInfos: _Optional[_Iterable[str]] = ..., requireAuth: bool = ..., authorizedInfo: _Optional[_Union[MasterAuthorizedInfo, _Mapping]] = ..., appdConfig: _Optional[_Union[ApprovedClientConfig, _Mapping]] = ...) -> None: ...

class MasterAuthorizedInfo(_message.Message):
    __slots__ = ["authAuthorizedToken", "visitAuthorizedToken"]
    AUTHAUTHORIZEDTOKEN_FIELD_NUMBER: _ClassVar[int]
    VISITAUTHORIZEDTOKEN_FIELD_NUMBER: _ClassVar[int]
    authAuthorizedToken: str
    visitAuthorizedToken: int
    def __init__(self, visitAuthorizedToken: _Optional[int] = ..., authAuthorizedToken: _Optional[str] = ...) -> None: ...

class MasterCertificateInfo(_message.Message):
    __slots__ = ["authInfo", "authorizedToken"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZEDTOKEN_FIELD_NUMBER: _ClassVar[int]
    authInfo: AuthenticateInfo
    authorizedToken: str
    def __init__(self, authInfo: _Optional[_Union[AuthenticateInfo, _Mapping]] = ..., authorizedToken: _Optional[str] = ...) -> None: ...

class OpsTaskInfo(_message.Message):
    __slots__ = ["csmFrmMaxOffsetCtrlId", "defFlowCheckId", "defFlowControlInfo", "groupFlowCheckId", "groupFlowControlInfo", "qryPriorityId", "requireAuth"]
    CSMFRMMAXOFFSETCTRLID_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCONTROLINFO_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCONTROLINFO_FIELD_NUMBER: _ClassVar[int]
    QRYPRIORITYID_FIELD_NUMBER: _ClassVar[int]
    REQUIREAUTH_FIELD_NUMBER: _ClassVar[int]
    csmFrmMaxOffsetCtrlId: int
    defFlowCheckId: int
    defFlowControlInfo: str
    groupFlowCheckId: int
    groupFlowControlInfo: str
    qryPriorityId: int
    requireAuth: bool
    def __init__(self, groupFlowCheckId: _Optional[int] = ..., defFlowCheckId: _Optional[int] = ..., qryPriorityId: _Optional[int] = ..., csmFrmMaxOffsetCtrlId: _Optional[int] = ..., requireAuth: bool = ..., defFlowControlInfo: _Optional[str] = ..., groupFlowControlInfo: _Optional[str] = ...) -> None: ...

class RegisterRequestC2M(_message.Message):
    __slots__ = ["authInfo", "clientId", "defFlowCheckId", "groupFlowCheckId", "groupName", "hostName", "jdkVersion", "notAllocated", "qryPriorityId", "requireBound", "requiredPartition", "selectBig", "sessionKey", "sessionTime", "ssdStoreId", "subscribeInfo", "topicCondition", "topicList", "totalCount"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    JDKVERSION_FIELD_NUMBER: _ClassVar[int]
    NOTALLOCATED_FIELD_NUMBER: _ClassVar[int]
    QRYPRIORITYID_FIELD_NUMBER: _ClassVar[int]
    REQUIREBOUND_FIELD_NUMBER: _ClassVar[int]
    REQUIREDPARTITION_FIELD_NUMBER: _ClassVar[int]
    SELECTBIG_FIELD_NUMBER: _ClassVar[int]
    SESSIONKEY_FIELD_NUMBER: _ClassVar[int]
    SESSIONTIME_FIELD_NUMBER: _ClassVar[int]
    SSDSTOREID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBEINFO_FIELD_NUMBER: _ClassVar[int]
    TOPICCONDITION_FIELD_NUMBER: _ClassVar[int]
    TOPICLIST_FIELD_NUMBER: _ClassVar[int]
    TOTALCOUNT_FIELD_NUMBER: _ClassVar[int]
    authInfo: MasterCertificateInfo
    clientId: str
    defFlowCheckId: int
    groupFlowCheckId: int
    groupName: str
    hostName: str
    jdkVersion: str
    notAllocated: bool
    qryPriorityId: int
    requireBound: bool
    requiredPartition: str
    selectBig: bool
    sessionKey: str
    sessionTime: int
    ssdStoreId: int
    subscribeInfo: _containers.RepeatedScalarFieldContainer[str]
    topicCondition: _containers.RepeatedScalarFieldContainer[str]
    topicList: _containers.RepeatedScalarFieldContainer[str]
    totalCount: int
    def __init__(self, clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., hostName: _Optional[str] = ..., topicList: _Optional[_Iterable[str]] = ..., subscribeInfo: _Optional[_Iterable[str]] = ..., topicCondition: _Optional[_Iterable[str]] = ..., requireBound: bool = ..., sessionTime: _Optional[int] = ..., sessionKey: _Optional[str] = ..., totalCount: _Optional[int] = ..., requiredPartition: _Optional[str] = ..., notAllocated: bool = ..., selectBig: bool = ..., groupFlowCheckId: _Optional[int] = ..., defFlowCheckId: _Optional[int] = ..., ssdStoreId: _Optional[int] = ..., qryPriorityId: _Optional[int] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ..., jdkVersion: _Optional[str] = ...) -> None: ...

class RegisterRequestC2MV2(_message.Message):
    __slots__ = ["authInfo", "clientId", "groupName", "hostName", "jdkVersion", "nodeId", "opsTaskInfo", "sourceCount", "subRepInfo", "topicCondition", "topicList"]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    GROUPNAME_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    JDKVERSION_FIELD_NUMBER: _ClassVar[int]
    NODEID_FIELD_NUMBER: _ClassVar[int]
    OPSTASKINFO_FIELD_NUMBER: _ClassVar[int]
    SOURCECOUNT_FIELD_NUMBER: _ClassVar[int]
    SUBREPINFO_FIELD_NUMBER: _ClassVar[int]
    TOPICCONDITION_FIELD_NUMBER: _ClassVar[int]
    TOPICLIST_FIELD_NUMBER: _ClassVar[int]
    authInfo: MasterCertificateInfo
    clientId: str
    groupName: str
    hostName: str
    jdkVersion: str
    nodeId: int
    opsTaskInfo: OpsTaskInfo
    sourceCount: int
    subRepInfo: ClientSubRepInfo
    topicCondition: _containers.RepeatedScalarFieldContainer[str]
    topicList: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, clientId: _Optional[str] = ..., groupName: _Optional[str] = ..., hostName: _Optional[str] = ..., sourceCount: _Optional[int] = ..., nodeId: _Optional[int] = ..., topicList: _Optional[_Iterable[str]] = ..., topicCondition: _Optional[_Iterable[str]] = ..., subRepInfo: _Optional[_Union[ClientSubRepInfo, _Mapping]] = ..., opsTaskInfo: _Optional[_Union[OpsTaskInfo, _Mapping]] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ..., jdkVersion: _Optional[str] = ...) -> None: ...

class RegisterRequestP2M(_message.Message):
    __slots__ = ["appdConfig", "authInfo", "brokerCheckSum", "clientId", "hostName", "jdkVersion", "topicList"]
    APPDCONFIG_FIELD_NUMBER: _ClassVar[int]
    AUTHINFO_FIELD_NUMBER: _ClassVar[int]
    BROKERCHECKSUM_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    JDKVERSION_FIELD_NUMBER: _ClassVar[int]
    TOPICLIST_FIELD_NUMBER: _ClassVar[int]
    appdConfig: ApprovedClientConfig
    authInfo: MasterCertificateInfo
    brokerCheckSum: int
    clientId: str
    hostName: str
    jdkVersion: str
    topicList: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, clientId: _Optional[str] = ..., topicList: _Optional[_Iterable[str]] = ..., brokerCheckSum: _Optional[int] = ..., hostName: _Optional[str] = ..., authInfo: _Optional[_Union[MasterCertificateInfo, _Mapping]] = ..., jdkVersion: _Optional[str] = ..., appdConfig: _Optional[_Union[ApprovedClientConfig, _Mapping]] = ...) -> None: ...

class RegisterResponseM2C(_message.Message):
    __slots__ = ["authorizedInfo", "defFlowCheckId", "defFlowControlInfo", "errCode", "errMsg", "groupFlowCheckId", "groupFlowControlInfo", "notAllocated", "qryPriorityId", "ssdStoreId", "success", "topicInfo"]
    AUTHORIZEDINFO_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    DEFFLOWCONTROLINFO_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCHECKID_FIELD_NUMBER: _ClassVar[int]
    GROUPFLOWCONTROLINFO_FIELD_NUMBER: _ClassVar[int]
    NOTALLOCATED_FIELD_NUMBER: _ClassVar[int]
    QRYPRIORITYID_FIELD_NUMBER: _ClassVar[int]
    SSDSTOREID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TOPICINFO_FIELD_NUMBER: _ClassVar[int]
    authorizedInfo: MasterAuthorizedInfo
    defFlowCheckId: int
    defFlowControlInfo: str
    errCode: int
    errMsg: str
    groupFlowCheckId: int
    groupFlowControlInfo: str
    notAllocated: bool
    qryPriorityId: int
    ssdStoreId: int
    success: bool
    topicInfo: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., topicInfo: _Optional[_Iterable[str]] = ..., notAllocated: bool = ..., defFlowCheckId: _Optional[int] = ..., defFlowControlInfo: _Optional[str] = ..., groupFlowCheckId: _Optional[int] = ..., groupFlowControlInfo: _Optional[str] = ..., ssdStoreId: _Optional[int] = ..., qryPriorityId: _Optional[int] = ..., authorizedInfo: _Optional[_Union[MasterAuthorizedInfo, _Mapping]] = ...) -> None: ...

class RegisterResponseM2CV2(_message.Message):
    __slots__ = ["authorizedInfo", "brokerConfigId", "brokerConfigList", "errCode", "errMsg", "opsTaskInfo"]
    AUTHORIZEDINFO_FIELD_NUMBER: _ClassVar[int]
    BROKERCONFIGID_FIELD_NUMBER: _ClassVar[int]
    BROKERCONFIGLIST_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    OPSTASKINFO_FIELD_NUMBER: _ClassVar[int]
    authorizedInfo: MasterAuthorizedInfo
    brokerConfigId: int
    brokerConfigList: _containers.RepeatedScalarFieldContainer[str]
    errCode: int
    errMsg: str
    opsTaskInfo: OpsTaskInfo
    def __init__(self, errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., brokerConfigId: _Optional[int] = ..., brokerConfigList: _Optional[_Iterable[str]] = ..., opsTaskInfo: _Optional[_Union[OpsTaskInfo, _Mapping]] = ..., authorizedInfo: _Optional[_Union[MasterAuthorizedInfo, _Mapping]] = ...) -> None: ...

class RegisterResponseM2P(_message.Message):
    __slots__ = ["appdConfig", "authorizedInfo", "brokerCheckSum", "brokerInfos", "errCode", "errMsg", "success"]
    APPDCONFIG_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZEDINFO_FIELD_NUMBER: _ClassVar[int]
    BROKERCHECKSUM_FIELD_NUMBER: _ClassVar[int]
    BROKERINFOS_FIELD_NUMBER: _ClassVar[int]
    ERRCODE_FIELD_NUMBER: _ClassVar[int]
    ERRMSG_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    appdConfig: ApprovedClientConfig
    authorizedInfo: MasterAuthorizedInfo
    brokerCheckSum: int
    brokerInfos: _containers.RepeatedScalarFieldContainer[str]
    errCode: int
    errMsg: str
    success: bool
    def __init__(self, success: bool = ..., errCode: _Optional[int] = ..., errMsg: _Optional[str] = ..., brokerCheckSum: _Optional[int] = ..., brokerInfos: _Optional[_Iterable[str]] = ..., authorizedInfo: _Optional[_Union[MasterAuthorizedInfo, _Mapping]] = ..., appdConfig: _Optional[_Union[ApprovedClientConfig, _Mapping]] = ...) -> None: ...
