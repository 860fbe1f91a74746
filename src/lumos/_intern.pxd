# C declarations of lumos._intern's kernels, for the kernel modules that call them in C
# (their own .pxd cimports from here; see lumos/_intern.py).
cpdef unsigned long long fnv(const unsigned char[::1] buf, Py_ssize_t off, Py_ssize_t ln) noexcept
cpdef long long intern_span(const unsigned char[::1] buf, Py_ssize_t off, Py_ssize_t ln, int[::1] tab, long long[:, ::1] rep, unsigned long long[::1] rep_hash, long long nrep) noexcept
