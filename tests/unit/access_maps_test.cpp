// The access-control maps: network sets (merged ranges, both families,
// IPv4-mapped addresses), digest sets, rspamd's map file syntax, and the
// MapLoader's reload rules (an edit is picked up; a broken edit, a vanished
// file or a file past max_map_entries keeps the last good content).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "address_text.h"

#include <chrono>
#include <fstream>
#include <thread>

#include "access/digest_set.h"
#include "access/map_file.h"
#include "access/network_set.h"
#include "config/config_loader.h"
#include "engine/map_loader.h"
#include "wire/base32.h"
#include "wire/keypair_text.h"
#include "temp_dir.h"

namespace shingled {
namespace {

sockaddr_storage addr(const char* text) { return test::address_of(text); }

bool in(const NetworkSet& set, const char* text) {
  const sockaddr_storage ss = addr(text);
  return set.contains(reinterpret_cast<const sockaddr*>(&ss));
}

NetworkSet set_of(std::initializer_list<const char*> texts) {
  std::vector<Network> nets;
  for (const char* t : texts) {
    Network n;
    std::string err;
    EXPECT_TRUE(parse_network(t, n, err)) << t << ": " << err;
    nets.push_back(n);
  }
  return NetworkSet(nets);
}

TEST(NetworkSet, tests_both_families_at_the_network_edges) {
  const NetworkSet s = set_of({"10.1.0.0/16", "192.0.2.7", "2001:db8::/32", "fe80::1"});
  EXPECT_TRUE(in(s, "10.1.0.0"));
  EXPECT_TRUE(in(s, "10.1.255.255"));
  EXPECT_FALSE(in(s, "10.0.255.255"));
  EXPECT_FALSE(in(s, "10.2.0.0"));
  EXPECT_TRUE(in(s, "192.0.2.7"));
  EXPECT_FALSE(in(s, "192.0.2.6"));
  EXPECT_FALSE(in(s, "192.0.2.8"));
  EXPECT_TRUE(in(s, "2001:db8:ffff::1"));
  EXPECT_FALSE(in(s, "2001:db9::"));
  EXPECT_TRUE(in(s, "fe80::1"));
  EXPECT_FALSE(in(s, "fe80::2"));
  EXPECT_TRUE(in(s, "::ffff:10.1.2.3")) << "an IPv4-mapped source is its IPv4 address";
  EXPECT_FALSE(in(s, "::10.1.2.3")) << "but not the old IPv4-compatible form";
  EXPECT_FALSE(NetworkSet().contains(nullptr));
  EXPECT_FALSE(in(NetworkSet(), "10.1.0.0"));
}

TEST(NetworkSet, nested_and_adjacent_networks_merge) {
  const NetworkSet s = set_of({"10.0.0.0/8", "10.1.0.0/16", "11.0.0.0/8", "12.0.0.1", "12.0.0.3"});
  EXPECT_EQ(s.ranges(), 3u) << "10/8 holds 10.1/16, and 11/8 follows it";
  EXPECT_TRUE(in(s, "11.255.255.255"));
  EXPECT_FALSE(in(s, "12.0.0.2"));
  EXPECT_TRUE(in(s, "12.0.0.3"));
  const NetworkSet all = set_of({"0.0.0.0/0", "::/0"});
  EXPECT_TRUE(in(all, "255.255.255.255"));
  EXPECT_TRUE(in(all, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
  EXPECT_EQ(all.ranges(), 1u);
}

TEST(DigestSet, finds_exactly_its_digests) {
  std::vector<Digest> ds(1000);
  for (size_t i = 0; i < ds.size(); ++i) {
    ds[i].fill(0);
    ds[i][0] = uint8_t(i);  // many share their head's low bits: probing works
    ds[i][63] = uint8_t(i >> 8);
  }
  ds.push_back(ds[3]);  // twice
  const DigestSet set(ds);
  EXPECT_EQ(set.size(), 1000u);
  for (const Digest& d : ds) EXPECT_TRUE(set.contains(d.data()));
  Digest other = ds[5];
  other[30] = 1;
  EXPECT_FALSE(set.contains(other.data()));
  EXPECT_FALSE(DigestSet().contains(other.data()));
}

void write_file(const std::string& path, const std::string& text) {
  // Written beside and renamed over, as editors and config managers do, so
  // a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary) << text;
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
}

TEST(MapFile, reads_rspamd_map_syntax) {
  test::TempDir dir;
  const std::string p = dir.path() + "/m.map";
  write_file(p, "# blocked scanners\n10.0.0.1\n\n  10.0.0.2  some value # why\r\n"
                "10.0.0.3#trailing comment\n\t# indented comment\n10.0.0.4");
  std::vector<MapLine> lines;
  std::string err;
  ASSERT_TRUE(read_map_file(p, 100, lines, err)) << err;
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].entry, "10.0.0.1");
  EXPECT_EQ(lines[0].line, 2u);
  EXPECT_EQ(lines[1].entry, "10.0.0.2");
  EXPECT_EQ(lines[2].entry, "10.0.0.3");
  EXPECT_EQ(lines[3].entry, "10.0.0.4") << "no newline at the end";
  EXPECT_EQ(lines[3].line, 7u);
  EXPECT_FALSE(read_map_file(p, 3, lines, err));
  EXPECT_NE(err.find("line 7: more than 3 entries (max_map_entries)"), std::string::npos) << err;
}

TEST(MapFile, refuses_what_is_not_a_map) {
  test::TempDir dir;
  std::vector<MapLine> lines;
  std::string err;
  EXPECT_FALSE(read_map_file(dir.path() + "/none", 10, lines, err));
  EXPECT_NE(err.find("cannot be read: No such file"), std::string::npos) << err;
  const std::string bin = dir.path() + "/data.mdb";
  write_file(bin, std::string("10.0.0.1\nab\0cd\n", 15));
  EXPECT_FALSE(read_map_file(bin, 10, lines, err));
  EXPECT_NE(err.find("line 2: a NUL byte (is this a map file?)"), std::string::npos) << err;
  write_file(bin, std::string(kMaxMapLine + 1, 'x'));
  EXPECT_FALSE(read_map_file(bin, 10, lines, err));
  EXPECT_NE(err.find("line 1: longer than 4096 bytes"), std::string::npos) << err;
}

TEST(MapFile, names_the_source_kind) {
  std::string path;
  EXPECT_EQ(classify_map_source("/etc/rspamd/x.map", path), MapSourceKind::file);
  EXPECT_EQ(path, "/etc/rspamd/x.map");
  EXPECT_EQ(classify_map_source("file:///etc/y.map", path), MapSourceKind::file);
  EXPECT_EQ(path, "/etc/y.map");
  EXPECT_EQ(classify_map_source("https://maps.rspamd.com/x", path), MapSourceKind::url);
  EXPECT_EQ(classify_map_source("sign+file:///etc/y.map", path), MapSourceKind::url);
  EXPECT_EQ(classify_map_source("10.0.0.1, 10.0.0.2", path), MapSourceKind::inline_list);
}

Config config_with(const std::string& text) {
  Config c = default_config();
  ConfigError e;
  EXPECT_TRUE(load_config_text(text, "test.conf", c, e)) << e.to_string();
  return c;
}

TEST(MapLoader, a_bad_file_at_start_names_its_line) {
  test::TempDir dir;
  const std::string p = dir.path() + "/blocked.map";
  write_file(p, "10.0.0.1\n10.0.0.0/33\n");
  const Config c = config_with("blocked = \"" + p + "\";\n");
  MapLoader loader(c);
  std::string err;
  EXPECT_FALSE(loader.load(err));
  EXPECT_NE(err.find(p + ": line 2: "), std::string::npos) << err;
  const Config missing = config_with("skip_hashes = \"" + dir.path() + "/nope.map\";\n");
  MapLoader loader2(missing);
  EXPECT_FALSE(loader2.load(err));
  EXPECT_NE(err.find("nope.map: cannot be read"), std::string::npos) << err;
  const Config dir_as_map = config_with("blocked = \"" + dir.path() + "\";\n");
  MapLoader loader3(dir_as_map);
  EXPECT_FALSE(loader3.load(err));
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

TEST(MapLoader, edits_are_picked_up_and_broken_edits_change_nothing) {
  test::TempDir dir;
  const std::string p = dir.path() + "/blocked.map";
  write_file(p, "10.0.0.1\n");
  const Config c = config_with("blocked = [\"192.0.2.1\", \"" + p + "\"];\n");
  MapLoader loader(c);
  std::string err;
  ASSERT_TRUE(loader.load(err)) << err;
  std::unique_ptr<AccessLists> lists = loader.build();
  EXPECT_TRUE(in(lists->blocked, "192.0.2.1")) << "inline entries and files together";
  EXPECT_TRUE(in(lists->blocked, "10.0.0.1"));
  EXPECT_FALSE(loader.refresh(false)) << "nothing changed";

  write_file(p, "10.0.0.2\n");
  EXPECT_TRUE(loader.refresh(false));
  lists = loader.build();
  EXPECT_FALSE(in(lists->blocked, "10.0.0.1"));
  EXPECT_TRUE(in(lists->blocked, "10.0.0.2"));
  EXPECT_EQ(loader.reloads(), 1u);

  write_file(p, "10.0.0.3\nnot-an-address\n");
  EXPECT_FALSE(loader.refresh(false)) << "a broken edit is refused";
  EXPECT_EQ(loader.failures(), 1u);
  lists = loader.build();
  EXPECT_TRUE(in(lists->blocked, "10.0.0.2")) << "and the last good content stays";
  EXPECT_FALSE(in(lists->blocked, "10.0.0.3"));
  EXPECT_FALSE(loader.refresh(false)) << "the same broken file is not re-read";
  EXPECT_EQ(loader.failures(), 1u);

  ASSERT_EQ(unlink(p.c_str()), 0);
  EXPECT_FALSE(loader.refresh(false));
  EXPECT_TRUE(in(loader.build()->blocked, "10.0.0.2")) << "a vanished file keeps its content";

  write_file(p, "10.0.0.4\n");
  EXPECT_TRUE(loader.refresh(false)) << "and comes back when it does";
  EXPECT_TRUE(in(loader.build()->blocked, "10.0.0.4"));
  EXPECT_TRUE(loader.refresh(true)) << "SIGHUP re-reads every file";
}

TEST(MapLoader, a_file_past_max_map_entries_keeps_the_old_map) {
  test::TempDir dir;
  const std::string p = dir.path() + "/skip.map";
  const std::string d1(128, 'a'), d2(128, 'b');
  write_file(p, d1 + "\n");
  const Config c = config_with("max_map_entries = 1;\nskip_hashes = \"file://" + p + "\";\n");
  MapLoader loader(c);
  std::string err;
  ASSERT_TRUE(loader.load(err)) << err;
  Digest a, b;
  a.fill(0xaa);
  b.fill(0xbb);
  EXPECT_TRUE(loader.build()->skip_hashes.contains(a.data()));
  write_file(p, d1 + "\n" + d2 + "\n");
  EXPECT_FALSE(loader.refresh(false));
  EXPECT_TRUE(loader.build()->skip_hashes.contains(a.data()));
  EXPECT_FALSE(loader.build()->skip_hashes.contains(b.data()));
}

// dynamic_keys_map: an array of keypair blocks; a reload replaces the
// keys, a bad block refuses the whole file (the old keys stay).
TEST(MapLoader, dynamic_keys_are_added_and_removed_and_a_bad_file_keeps_them) {
  test::TempDir dir;
  const std::string p = dir.path() + "/keys.map";
  const Keypair a = generate_keypair(), b = generate_keypair();
  auto block = [](const Keypair& kp, const std::string& ext) {
    return "{ pubkey = \"" + base32_encode(kp.public_key, 32) + "\"; privkey = \"" +
           base32_encode(kp.secret_key, 32) + "\"; " + ext + " }";
  };
  write_file(p, "# partners\n[\n  " + block(a, "extensions { name = \"a\"; allowed_ops = [\"read\", \"write\"]; }") + "\n]\n");
  const Config c = config_with("dynamic_keys_map = \"" + p + "\";\n");
  MapLoader loader(c);
  std::string err;
  ASSERT_TRUE(loader.load(err)) << err;
  std::unique_ptr<AccessLists> lists = loader.build();
  ASSERT_NE(lists->dynamic_keys.find(a.key_id()), nullptr);
  EXPECT_EQ(lists->dynamic_keys.find(a.key_id())->rules.name, "a");
  EXPECT_EQ(lists->dynamic_keys.find(a.key_id())->rules.ops, kKeyRead | kKeyWrite);
  EXPECT_EQ(lists->dynamic_keys.find(b.key_id()), nullptr);

  write_file(p, "[" + block(b, "") + "]");
  EXPECT_TRUE(loader.refresh(false));
  lists = loader.build();
  EXPECT_EQ(lists->dynamic_keys.find(a.key_id()), nullptr) << "removed";
  ASSERT_NE(lists->dynamic_keys.find(b.key_id()), nullptr) << "added";
  EXPECT_EQ(lists->dynamic_keys.find(b.key_id())->rules.ops, kKeyRead) << "rspamd's default";

  write_file(p, "[\n" + block(a, "") + ",\n" + block(b, "extensions { allowed_ops = [\"wirte\"]; }") + "\n]");
  EXPECT_FALSE(loader.refresh(false));
  lists = loader.build();
  EXPECT_NE(lists->dynamic_keys.find(b.key_id()), nullptr) << "the old keys stay";
  EXPECT_EQ(lists->dynamic_keys.find(a.key_id()), nullptr);

  write_file(p, "[" + block(a, "") + ", " + block(a, "") + "]");
  EXPECT_FALSE(loader.refresh(false)) << "one key twice";
  write_file(p, "{ not = an_array; }");
  EXPECT_FALSE(loader.refresh(false));
  EXPECT_EQ(loader.failures(), 3u);
}

TEST(MapLoader, allow_update_keys_files_hold_keypair_ids) {
  test::TempDir dir;
  const std::string p = dir.path() + "/writers.map";
  const Keypair a = generate_keypair();
  write_file(p, keypair_id(a) + " # the learning host\n");
  const Config c = config_with("allow_update_keys = \"" + p + "\";\n");
  MapLoader loader(c);
  std::string err;
  ASSERT_TRUE(loader.load(err)) << err;
  EXPECT_TRUE(loader.build()->allow_update_keys.contains(KeyRules::from({}, a).id.data()));
  write_file(p, base32_encode(a.public_key, 32) + "\n");
  EXPECT_FALSE(loader.refresh(false)) << "a public key is not an id";
}

}  // namespace
}  // namespace shingled
