// Reads back DIR/metrics.jsonl (trainstep/metrics_log.h) for `trainstep plot`.
// The reader is public (trainstep/metrics.h, where its types and errors are
// described); this header stays so the library's own code keeps one name
// for it beside trainstep/metrics_log.h.
#pragma once
#include "trainstep/metrics.h"
