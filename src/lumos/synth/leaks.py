"""The leak check: no string of the input, except schema vocabulary, in an obfuscated output.

Definitions (the check is exactly this, no more):

* **Token**: a maximal run of ASCII identifier characters ``[A-Za-z0-9_]`` in a string (so
  ``model.ZorblaxBlock.forward`` has the tokens ``model``, ``ZorblaxBlock``, ``forward``); a
  token's **parts** are its non-empty ``_``-separated pieces.
* **Strings of the input**: every string a file holds, as decoded: for Kineto JSON every object
  key and every string value, at any depth (names, categories, args, metadata); for a Chakra ET
  every node name, attribute name, string or bytes attribute value (lists too), attribute doc
  string, ``inputs``/``outputs`` strings (values, shapes, types) and the metadata's version and
  attributes.
* **Vocabulary**: what a trace format or lumos defines, not what a user named. A token is
  vocabulary when, compared case-insensitively, it is a word of :data:`VOCABULARY` (Kineto keys,
  categories and phases, Chakra attribute names, lumos class names, collective and dtype names,
  CUPTI copy words), a CUDA/HIP runtime or driver API name (``cuda``/``cu``/``hip``/``hsa``
  followed by an upper-case letter: public API names are schema vocabulary), a number
  (decimal digits, ``0x`` hex, or lower-case hex digits only, the shape of addresses, ids and
  the keyed hashes obfuscation writes), or when each of its parts is one of these.
* **Secrets** of an input: its tokens and token parts of at least :data:`MIN_LEN` characters
  that are not vocabulary.
* **Leak**: a secret that occurs, byte for byte, inside an output token that is not
  vocabulary. Output tokens made only of vocabulary and numbers (``gemm_3fa9c01b2d4e``,
  ``ncclDevKernel_AllReduce_...``) are trusted and not searched. Kineto outputs are checked on
  their uncompressed bytes (a gzip stream's bytes say nothing); Chakra outputs on the strings of
  the trace about to be written, which the writer serializes as they are (the rest of a
  protobuf record is varints and fixed-width numbers). Both checks run before the file is
  written, so a leaking output is never on disk.

Cost: one pass over the output bytes (``bytes.translate`` + ``split``) collects its distinct
tokens; only the
untrusted ones (none, for a correct obfuscation) are searched, by looking up each of their
substrings of a secret's length in the secrets' set: O(bytes + untrusted tokens x their length x
distinct secret lengths), never O(secrets x bytes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lumos.errors import LumosError
from lumos.ingest.comm_names import COLLECTIVE_KINDS
from lumos.synth.classes import CLASSES

__all__ = [
    "MIN_LEN",
    "VOCABULARY",
    "LeakError",
    "find_leak",
    "is_vocabulary",
    "secrets_of",
    "tokens_of",
]

#: Shortest secret: shorter runs (``mm``, ``fc``, ``t``) are everywhere and say nothing.
MIN_LEN = 4

_TOKEN = re.compile(r"[A-Za-z0-9_]+")
#: bytes.translate table: identifier bytes kept, every other byte a space (split() then yields
#: the tokens in one C pass, faster than a regular expression over tens of megabytes).
_TO_SPACE = bytes(
    c if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95) else 32 for c in range(256)
)
_NUMBER = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]+|[0-9a-f]+")
_RUNTIME_API = re.compile(r"(cuda|cu|hip|hsa|nvtx)[A-Z][A-Za-z0-9_]*")

_WORDS = """
traceEvents schemaVersion deviceProperties distributedInfo displayTimeUnit baseTimeNanoseconds
profile_memory with_stack with_flops record_shapes with_modules
ph cat name pid tid ts dur id bp args s
cpu_op operator user_annotation gpu_user_annotation python_function cuda_runtime cuda_driver
hip_runtime hip_driver runtime driver kernel gpu_memcpy gpu_memset memcpy memset cuda_sync
Trace ac2g fwdbwd async async_cpu_to_gpu cpu_instant_event other overhead
process_name process_labels process_sort_index thread_name thread_sort_index labels sort_index
CPU GPU
correlation External external Record function Ev Idx Sequence number Fwd thread device stream
bytes Bytes cbid context queued registers per shared memory blocks warps SM grid block est
achieved occupancy bandwidth GB Device Type Addr Total Allocated Reserved Op count
cuda_sync_kind wait_on_stream wait_on_cuda_event_record_corr_id wait_on_cuda_event_id
Collective In Out msg nelems split size dtype Group Process Ranks Name Description Seq p2p_seq
Global rank stride start Input Dims type Concrete Inputs Strides
backend world_size pg_count pg_config pg_name pg_desc backend_config pg_size ranks
nccl_version nccl gloo rccl mpi ucc default_pg undefined
totalGlobalMem computeMajor computeMinor maxThreadsPerBlock maxThreadsPerMultiprocessor
regsPerBlock regsPerMultiprocessor warpSize sharedMemPerBlock sharedMemPerMultiprocessor numSms
sharedMemPerBlockOptin
ProfilerStep record_param_comms c10d
ncclKernel ncclDevKernel rcclKernel Generic SendRecv AllReduce AllGather ReduceScatter AllToAll
Broadcast Reduce Gather Scatter Barrier Send Recv
allreduce allgather reducescatter alltoall broadcast reduce gather scatter barrier send recv
sendrecv coalesced base tensor into any source wait alltoallv
Memcpy Memset HtoD DtoH DtoD HtoH PtoP Pageable Pinned Managed Array
float double half bfloat16 float16 float32 float64 int int8 int16 int32 int64 uint8 long short
char bool byte complex Float Double Half BFloat16 Int Long Short Char Bool Byte Scalar
ScalarList TensorList GenericList Tensor Object None True False true false null signed unsigned
is_cpu_op comm_type comm_size comm_src comm_dst comm_tag num_ops tensor_size involved_dim
rf_id fw_parent fw_tid seq_id scope op_schema schema version time start_ts finish_ts
dur_ns ts_ns rank process_group init
lumos thread synthetic delay proc kind order event idx edge src dst delay_ns task record ann
first last lead tail flops comm size_bytes pg seq_id peer tag wait_ns names label rows ptr
marker view synchronize scan compute ns us micros cuda hip desc Python parent ProcessGroup
"""

#: The vocabulary words (lower-cased); see the module docstring for the rest of the rule.
VOCABULARY: frozenset[str] = frozenset(
    w.lower()
    for w in (
        *_WORDS.split(),
        *COLLECTIVE_KINDS,
        *(part for c in CLASSES for part in re.split(r"[._]", c)),
    )
)


class LeakError(LumosError):
    """An output file holds a string of the input that is not schema vocabulary."""


def _word(tok: str) -> bool:
    return (
        tok.lower() in VOCABULARY
        or _NUMBER.fullmatch(tok) is not None
        or _RUNTIME_API.fullmatch(tok) is not None
    )


def is_vocabulary(token: str) -> bool:
    """True when ``token`` is vocabulary (the module docstring's rule).

    >>> is_vocabulary("cudaLaunchKernel"), is_vocabulary("gemm_3fa9c01b2d4e")
    (True, True)
    >>> is_vocabulary("ZorblaxSecretBlock"), is_vocabulary("attention_Zorblax")
    (False, False)
    """
    if _word(token):
        return True
    parts = [p for p in token.split("_") if p]
    return bool(parts) and all(_word(p) for p in parts)


def tokens_of(text: str) -> list[str]:
    """The tokens of ``text`` (maximal ``[A-Za-z0-9_]`` runs)."""
    return _TOKEN.findall(text)


def secrets_of(strings: Iterable[str]) -> set[str]:
    """The secrets of some input strings: tokens and token parts of at least :data:`MIN_LEN`
    characters that are not vocabulary.

    >>> sorted(secrets_of(["model.ZorblaxBlock_3.forward", "cudaLaunchKernel", "aten::mm"]))
    ['ZorblaxBlock', 'ZorblaxBlock_3', 'aten', 'forward', 'model']
    """
    out: set[str] = set()
    seen: set[str] = set()
    for s in set(strings):
        for tok in _TOKEN.findall(s):
            if tok in seen:
                continue
            seen.add(tok)
            if len(tok) >= MIN_LEN and not is_vocabulary(tok):
                out.add(tok)
            if "_" in tok:
                out.update(p for p in tok.split("_") if len(p) >= MIN_LEN and not _word(p))
    return out


def find_leak(data: bytes | Iterable[str], secrets: set[str]) -> str | None:
    """The first secret (in sorted order of the output tokens) that occurs inside an untrusted
    token of ``data`` (output bytes, or the output's strings); None when there is none."""
    if not secrets:
        return None
    if isinstance(data, bytes | bytearray | memoryview):
        runs = {r.decode("ascii") for r in set(bytes(data).translate(_TO_SPACE).split())}
    else:
        runs = {t for s in data for t in _TOKEN.findall(s)}
    lengths = sorted({len(s) for s in secrets})
    for run in sorted(runs):
        if len(run) < MIN_LEN or run.isdigit() or is_vocabulary(run):
            continue
        for n in lengths:
            if n > len(run):
                break
            for i in range(len(run) - n + 1):
                if run[i : i + n] in secrets:
                    return run[i : i + n]
    return None
