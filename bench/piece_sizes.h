#ifndef GPUTRAVEL_BENCH_PIECE_SIZES_H_
#define GPUTRAVEL_BENCH_PIECE_SIZES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gputravel {
namespace bench {

// What the size of AesGcm's private pieces costs (docs/performance.md, item
// 32): AesGcm::EncryptToShared from a large plaintext buffer into the slots
// of a /dev/shm bounce ring, as the holder's workers do it, and
// AesGcm::DecryptFromShared from the ring into a large buffer, as the
// emulated copy engine does it, once per piece size, next to OpenSSL's own
// in-place loop (the yardstick of (a)). The sizes take turns within each
// round, in an order reversed every other round, so a drift of the
// machine's speed falls on all of them alike.
struct PieceOptions {
  std::vector<size_t> message_sizes = {size_t{64} << 10, size_t{2} << 20};
  // Multiples of 64 bytes (AesGcm::SetPieceSizes); the first is the
  // production size.
  std::vector<size_t> pieces;
  int rounds = 5;
  double seconds = 0.2;  // per figure per round
  size_t large_bytes = size_t{256} << 20;  // the plaintext source, the device memory
  uint32_t slots = 4;
  std::string bounce_dir = "/dev/shm";

  static PieceOptions Full();
  static PieceOptions Quick();  // a smoke run: tiny sizes, no figures
};

struct PieceFigure {
  size_t piece = 0;
  std::vector<double> encrypt_mbps, decrypt_mbps;  // one per round
  double encrypt_median = 0, decrypt_median = 0;
  // Median over rounds of MB/s / that round's in-place reference.
  double encrypt_ratio = 0, decrypt_ratio = 0;
};

struct PieceTable {
  size_t message_bytes = 0;
  std::vector<double> reference_mbps;  // OpenSSL in place, one per round
  double reference_median = 0;
  std::vector<PieceFigure> figures;  // in the order of PieceOptions::pieces
};

// INVALID_ARGUMENT for options that cannot be measured (no sizes, a piece
// AesGcm refuses, a message size that is not a multiple of 32 or larger
// than a quarter of `large_bytes`, rounds outside 1..100).
absl::StatusOr<std::vector<PieceTable>> MeasurePieceSizes(const PieceOptions& options);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_PIECE_SIZES_H_
