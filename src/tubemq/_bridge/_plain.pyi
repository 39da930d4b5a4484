# Types of the compiled blocking send (tubemq/_bridge/_plain.pyx): the same classes and contract as
# its pure-Python twin, tubemq._bridge._plain_py.
from ._plain_py import Leg as Leg
from ._plain_py import PlainRoute as PlainRoute
from ._plain_py import PlainSender as PlainSender

implementation: str
