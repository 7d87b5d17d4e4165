// Internal functions the host tests call directly (planners, the override parser): exported from libgk, whose other
// internals stay hidden, but not part of the public API (include/gk).
#pragma once

#define GK_INTERNAL_API __attribute__((visibility("default")))
