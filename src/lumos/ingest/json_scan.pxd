# C declarations of lumos.ingest.json_scan's primitives, for the kernel modules that call them in
# C (their own .pxd cimports from here; see lumos/ingest/json_scan.py).
cpdef Py_ssize_t whitespace_end(const unsigned char[::1] buf, Py_ssize_t i, Py_ssize_t end) noexcept
cpdef (Py_ssize_t, int) string_end(const unsigned char[::1] buf, Py_ssize_t i, Py_ssize_t end) noexcept
cpdef Py_ssize_t skip_value(const unsigned char[::1] buf, Py_ssize_t i, Py_ssize_t end) noexcept
cpdef (Py_ssize_t, long long) as_int(const unsigned char[::1] buf, Py_ssize_t i, Py_ssize_t end) noexcept
cpdef (Py_ssize_t, double, int) as_float(const unsigned char[::1] buf, Py_ssize_t i, Py_ssize_t end) noexcept
cpdef (Py_ssize_t, Py_ssize_t, int) member(const unsigned char[::1] buf, Py_ssize_t i, Py_ssize_t end) noexcept
cpdef (Py_ssize_t, int) after_member(const unsigned char[::1] buf, Py_ssize_t i, Py_ssize_t end, unsigned char close) noexcept
