// A cluster snapshot's bytes: records cut into whole-record chunks come
// back in order with their types, keys and values; the manifest round-trips;
// and every way a chunk or a manifest can be wrong is refused.
#include "cluster/snapshot_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shingled::cluster {
namespace {

struct Rec {
  uint8_t type;
  std::string key, value;
};

TEST(SnapshotCodec, records_cut_into_chunks_come_back_in_order) {
  std::vector<std::string> chunks;
  SnapshotWriter writer([&](const std::string& c) {
    chunks.push_back(c);
    return true;
  }, 1000);
  std::vector<Rec> in;
  for (int i = 0; i < 100; ++i) in.push_back(Rec{uint8_t(1 + i % 5), "key-" + std::to_string(i), std::string(size_t(i * 3), 'v')});
  for (const Rec& r : in) ASSERT_TRUE(writer.add(r.type, r.key, r.value));
  ASSERT_TRUE(writer.finish());
  EXPECT_EQ(writer.records(), 100u);
  EXPECT_EQ(writer.chunks(), chunks.size());
  EXPECT_GT(chunks.size(), 5u);
  std::vector<Rec> out;
  SnapshotChecker checker;
  std::string error;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_LE(chunks[i].size(), 1000u);
    checker.add(chunks[i]);
    ASSERT_TRUE(read_snapshot_chunk(chunks[i], i, [&](uint8_t t, std::string_view k, std::string_view v) {
      out.push_back(Rec{t, std::string(k), std::string(v)});
      return true;
    }, error)) << error;
  }
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].type, in[i].type);
    EXPECT_EQ(out[i].key, in[i].key);
    EXPECT_EQ(out[i].value, in[i].value);
  }
  SnapshotManifest m;
  m.id = "a-1";
  m.chunks = writer.chunks();
  m.bytes = writer.bytes();
  m.checksum = writer.checksum();
  EXPECT_TRUE(checker.matches(m, error)) << error;
  m.checksum ^= 1;
  EXPECT_FALSE(checker.matches(m, error));
}

TEST(SnapshotCodec, a_writer_refuses_what_the_format_cannot_hold_and_stops_when_emit_fails) {
  SnapshotWriter writer([](const std::string&) { return false; }, 100);
  EXPECT_FALSE(writer.add(1, "", "v"));                              // empty key
  EXPECT_FALSE(writer.add(1, std::string(512, 'k'), "v"));           // longer than LMDB's keys
  EXPECT_FALSE(writer.add(1, "k", std::string(kSnapshotMaxValue + 1, 'v')));
  EXPECT_TRUE(writer.add(1, "k", std::string(80, 'v')));
  EXPECT_FALSE(writer.add(1, "k2", std::string(80, 'v')));  // the full chunk's emit failed
}

TEST(SnapshotCodec, a_bad_chunk_is_refused_with_its_reason) {
  std::string chunk;
  SnapshotWriter writer([&](const std::string& c) {
    chunk = c;
    return true;
  });
  ASSERT_TRUE(writer.add(1, "key", "value"));
  ASSERT_TRUE(writer.finish());
  std::string error;
  auto accept = [](uint8_t, std::string_view, std::string_view) { return true; };
  EXPECT_TRUE(read_snapshot_chunk(chunk, 0, accept, error));
  EXPECT_FALSE(read_snapshot_chunk(chunk, 1, accept, error));  // out of order
  EXPECT_NE(error.find("out of order"), std::string::npos);
  EXPECT_FALSE(read_snapshot_chunk(chunk.substr(0, chunk.size() - 1), 0, accept, error));  // cut short
  EXPECT_FALSE(read_snapshot_chunk(chunk.substr(0, 10), 0, accept, error));                // a head cut short
  std::string zero_key = chunk;
  zero_key[9] = 0;  // key length 0
  zero_key[10] = 0;
  EXPECT_FALSE(read_snapshot_chunk(zero_key, 0, accept, error));
  EXPECT_FALSE(read_snapshot_chunk(chunk, 0, [](uint8_t, std::string_view, std::string_view) { return false; }, error));
}

TEST(SnapshotCodec, manifests_round_trip_and_bad_ones_are_refused) {
  SnapshotManifest m;
  m.id = "node-a-1795755594-42";
  m.node = "node-a";
  m.created = 1795755594;
  m.records = 3065;
  m.chunks = 4;
  m.bytes = 1039274;
  m.checksum = 0xfedcba9876543210ull;
  m.first_needed = 3000;
  SnapshotManifest back;
  std::string error;
  ASSERT_TRUE(decode_manifest(encode_manifest(m), back, error)) << error;
  EXPECT_EQ(back.id, m.id);
  EXPECT_EQ(back.node, m.node);
  EXPECT_EQ(back.created, m.created);
  EXPECT_EQ(back.records, m.records);
  EXPECT_EQ(back.chunks, m.chunks);
  EXPECT_EQ(back.bytes, m.bytes);
  EXPECT_EQ(back.checksum, m.checksum);
  EXPECT_EQ(back.first_needed, m.first_needed);
  EXPECT_FALSE(decode_manifest("shingled-snapshot 2\nid=a\nnode=a\n", back, error));  // another format
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nnode=a\nfirst_needed=1\n", back, error));  // no id
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nid=a\nnode=a\nrecords=-1\n", back, error));
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nid=a\nnode=a\nrecords=18446744073709551616\n", back, error));
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nid=a\nnode=a\nfirst_needed=0\n", back, error));
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nid=a\nnode=a\njunk\n", back, error));
  // An id that would widen its chunks' subject filter.
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nid=a.>\nnode=a\nfirst_needed=1\n", back, error));
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nid=*\nnode=a\nfirst_needed=1\n", back, error));
  EXPECT_FALSE(decode_manifest("shingled-snapshot 1\nid=a b\nnode=a\nfirst_needed=1\n", back, error));
  EXPECT_TRUE(decode_manifest("shingled-snapshot 1\nid=n_1-2\nnode=a\nfirst_needed=1\n", back, error)) << error;
  EXPECT_TRUE(decode_manifest("shingled-snapshot 1\nid=a\nnode=a\nlater_field=x\n", back, error));  // a later format's field
}

}  // namespace
}  // namespace shingled::cluster
