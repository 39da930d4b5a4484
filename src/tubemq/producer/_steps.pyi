# Types of the compiled plain-send steps (tubemq/producer/_steps.pyx): the same class and contract as its
# pure-Python twin, tubemq.producer._steps_py.
from ._steps_py import PlainSteps as PlainSteps

implementation: str
