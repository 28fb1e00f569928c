// A bootstrap's marker (daemon/cluster_snapshot.h): a database that holds
// one is a bootstrap cut short, named by its snapshot, and one without is
// not; a snapshot is never taken from such a database, nor from one without
// a stream position for every shard. (Taking and restoring against NATS:
// tests/integration/cluster_snapshot_test.sh.)
#include "daemon/cluster_snapshot.h"

#include <gtest/gtest.h>

#include <atomic>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace shingled {
namespace {

class ClusterSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/shingled-snapshot-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << "mkdtemp: " << std::strerror(errno);
    root_ = tmpl;
    std::string error;
    ASSERT_TRUE(env_.open(root_ + "/db", size_t(1) << 20, error)) << error;
  }
  void TearDown() override {
    env_.close();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void put(std::string_view key, std::string_view value, bool erase = false) {
    const Change c{RecordType::cluster, erase, key, value};
    std::string error;
    ASSERT_TRUE(env_.apply(&c, 1, 1, error)) << error;
  }
  std::string root_;
  LmdbEnvironment env_;
};

TEST_F(ClusterSnapshotTest, a_marker_left_behind_names_the_interrupted_bootstrap) {
  std::string snapshot, error;
  ASSERT_TRUE(interrupted_bootstrap(env_, snapshot, error)) << error;
  EXPECT_EQ(snapshot, "");
  put("bootstrap", "a-1795757805-805615");
  ASSERT_TRUE(interrupted_bootstrap(env_, snapshot, error)) << error;
  EXPECT_EQ(snapshot, "a-1795757805-805615");
  put("bootstrap", "", true);
  ASSERT_TRUE(interrupted_bootstrap(env_, snapshot, error)) << error;
  EXPECT_EQ(snapshot, "");
}

// The database is checked before any NATS server is asked for (none
// listens on the port given): a half-bootstrapped database and one without
// a stream position for every shard are refused by name; a whole one gets
// as far as the connection.
TEST_F(ClusterSnapshotTest, no_snapshot_from_a_half_bootstrapped_or_incomplete_database) {
  ClusterConfig cluster;
  cluster.enabled = true;
  cluster.servers = {"nats://127.0.0.1:1"};
  cluster.node = "n1";
  cluster::SnapshotManifest m;
  std::string error;
  auto position = [](unsigned shard) {
    std::string key(4, '\0');
    key[3] = char(shard);  // the shard, 4 bytes big-endian (BlobPending's slot key)
    return key;
  };
  put(position(0), std::string(8, '\1'));
  EXPECT_FALSE(take_cluster_snapshot(env_, cluster, "n1", 64, 0, 0, m, error));
  EXPECT_NE(error.find("positions for 1 of its 64 shards"), std::string::npos) << error;
  for (unsigned shard = 1; shard < 64; ++shard) put(position(shard), std::string(8, '\1'));
  EXPECT_FALSE(take_cluster_snapshot(env_, cluster, "n1", 64, 0, 0, m, error));
  EXPECT_NE(error.find("connecting to NATS"), std::string::npos) << error;
  // A stopping daemon cancels its periodic snapshot: the walk ends before
  // anything is sent.
  const std::atomic<bool> stopping{true};
  EXPECT_FALSE(take_cluster_snapshot(env_, cluster, "n1", 64, 0, 0, m, error, &stopping));
  EXPECT_NE(error.find("cancelled: the daemon is stopping"), std::string::npos) << error;
  put("bootstrap", "a-1");
  EXPECT_FALSE(take_cluster_snapshot(env_, cluster, "n1", 64, 0, 0, m, error));
  EXPECT_NE(error.find("interrupted bootstrap"), std::string::npos) << error;
}

}  // namespace
}  // namespace shingled
