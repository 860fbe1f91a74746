# What lumos.chakra._wire_attr calls in C (see lumos/chakra/_wire.pxd).
from lumos.chakra._wire cimport _attr_wire_type, _float64_bits, _le, _signed32, _signed64, _skip, _varint, _vcode
