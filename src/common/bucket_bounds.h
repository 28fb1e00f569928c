// The bounds of a rate-limit bucket's numbers, wherever they come from: the
// config file, a request on the wire, a stored bucket. One place, so that
// the decoder refuses exactly what the config loader refuses, and the bucket
// arithmetic can rely on every operand being finite and small enough that no
// sum or product reaches infinity (a level of +inf once made wait times NaN
// and hung a worker).
#pragma once

namespace shingled {

// A burst above this is a typo (and would lose the 1e-9 precision of a level).
inline constexpr double kMaxBucketBurst = 1e12;
// Leak (drain) per second: a bucket that drains faster than this is no limit.
inline constexpr double kMaxBucketLeakPerSecond = 1e12;
// The cost of one message or bucket operation (a recipient count at most, in
// practice).
inline constexpr double kMaxBucketCost = 1e12;
// A level never goes above this: far above any burst, far below infinity,
// however many costs are charged to a bucket that never drains.
inline constexpr double kMaxBucketLevel = 1e18;

}  // namespace shingled
