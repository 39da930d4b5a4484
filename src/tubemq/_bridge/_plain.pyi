# Types of the compiled blocking loops and send (tubemq/_bridge/_plain.pyx): the same functions, classes
# and contract as its pure-Python twin, tubemq._bridge._plain_py.
from ._plain_py import SEND_FLAGS as SEND_FLAGS
from ._plain_py import STALE_CHECK_AFTER as STALE_CHECK_AFTER
from ._plain_py import Leg as Leg
from ._plain_py import PlainRoute as PlainRoute
from ._plain_py import PlainSender as PlainSender
from ._plain_py import read_answer as read_answer
from ._plain_py import write_frame as write_frame

implementation: str
