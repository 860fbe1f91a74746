# C declarations of lumos.chakra._wire: what it calls in C, and the helpers that
# lumos.chakra._wire_attr calls in C (its own .pxd cimports them; see lumos/chakra/_wire.py).
from lumos._intern cimport intern_span

cpdef (unsigned long long, Py_ssize_t) _varint(const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t end) noexcept
cpdef int _vcode(Py_ssize_t p) noexcept
cpdef Py_ssize_t _skip(const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t end, long long wt) noexcept
cpdef long long _attr_wire_type(long long fno) noexcept
cpdef long long _signed64(unsigned long long u) noexcept
cpdef long long _signed32(unsigned long long u) noexcept
cpdef unsigned long long _le(const unsigned char[::1] buf, Py_ssize_t p, Py_ssize_t width) noexcept
cpdef unsigned long long _float64_bits(unsigned long long b) noexcept
