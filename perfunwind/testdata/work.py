# work.py: the Python program the perfunwind tests record and unwind:
# the interpreter's own frames (recursion, json, re, sort with a key
# function) for the number of seconds of CPU time given (the thread's,
# so that a recording sampled on CPU time gets as many samples on a
# loaded machine as on an idle one).
import json
import re
import sys
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work(sec):
    end = time.thread_time() + sec
    s = 0
    while time.thread_time() < end:
        s += fib(18)
        s += len(json.dumps({str(i): [i, i * 2, "x" * i] for i in range(50)}))
        s += len(re.findall(r"[a-z]+\d", "abc1 def2 ghi3 " * 20))
        s += sum(sorted(range(1000), key=lambda x: -x))
    return s


print(work(float(sys.argv[1])))
