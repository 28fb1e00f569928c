// Pins down the config file: defaults, every option, rspamd's worker block
// forms, and that every mistake (syntax, unknown or unsupported option,
// duplicate, bad value) is refused with the right line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "config/config_loader.h"
#include "common/net_address.h"
#include "config/ratelimit_config_loader.h"

namespace shingled {
namespace {

Config load_ok(const std::string& text) {
  Config cfg;
  ConfigError error;
  bool ok = load_config_text(text, "test.conf", cfg, error);
  EXPECT_TRUE(ok) << "load failed: " << error.to_string() << "\n--- input ---\n" << text;
  return cfg;
}

ConfigError load_error(const std::string& text) {
  Config cfg;
  ConfigError error;
  bool ok = load_config_text(text, "test.conf", cfg, error);
  EXPECT_FALSE(ok) << "expected an error for:\n" << text;
  EXPECT_EQ(error.file, "test.conf") << "every error names the file";
  return error;
}

// Expects a load error at `line` whose reason contains `fragment`.
void expect_error(const std::string& text, int line, const std::string& fragment) {
  ConfigError error = load_error(text);
  EXPECT_EQ(error.line, line) << "wrong line for: " << error.to_string() << "\ninput:\n" << text;
  EXPECT_NE(error.reason.find(fragment), std::string::npos)
      << "expected '" << fragment << "' in: " << error.to_string() << "\ninput:\n" << text;
}

std::vector<std::string> bind_texts(const Config& cfg) {
  std::vector<std::string> out;
  for (const ListenAddress& la : cfg.bind_sockets) {
    out.push_back(format_sockaddr(reinterpret_cast<const sockaddr*>(&la.addr)));
  }
  return out;
}

std::vector<std::string> allow_texts(const Config& cfg) {
  std::vector<std::string> out;
  for (const Network& net : cfg.allow_update) out.push_back(net.text);
  return out;
}

using Strings = std::vector<std::string>;

TEST(ConfigDefaults, built_in_defaults_listen_and_allow_on_loopback) {
  Config cfg = default_config();
  EXPECT_EQ(bind_texts(cfg), Strings{"127.0.0.1:11335"});
  EXPECT_EQ(allow_texts(cfg), (Strings{"127.0.0.1", "::1"}));
  EXPECT_EQ(cfg.expire_seconds, 90ull * 86400);
  EXPECT_EQ(cfg.max_hashes, 1000000u);
  EXPECT_EQ(cfg.workers, 0u);
  EXPECT_TRUE(cfg.pin_workers);
  EXPECT_EQ(cfg.io, IoBackendKind::uring);
  EXPECT_EQ(cfg.hashfile, "data/shingled.lmdb");
  EXPECT_EQ(cfg.sync_seconds, 60u);
  EXPECT_EQ(cfg.source, "");
}

TEST(ConfigDefaults, empty_file_gives_the_defaults_and_records_its_source) {
  Config cfg = load_ok("# nothing set\n");
  EXPECT_EQ(bind_texts(cfg), Strings{"127.0.0.1:11335"});
  EXPECT_EQ(allow_texts(cfg), (Strings{"127.0.0.1", "::1"}));
  EXPECT_EQ(cfg.expire_seconds, 90ull * 86400);
  EXPECT_EQ(cfg.source, "test.conf");
}

TEST(ConfigOptions, every_option_is_read_at_top_level) {
  Config cfg = load_ok(
      "bind_socket = \"10.0.0.1:11335\";\n"
      "expire = 30d;\n"
      "allow_update = [\"10.0.0.0/8\", \"::1\"];\n"
      "hashfile = \"/var/lib/shingled/fuzzy.db\";\n"
      "max_hashes = 10M;\n"
      "workers = 4;\n"
      "pin_workers = no;\n"
      "io = recvmmsg;\n"
      "control_socket = \"/run/shingled.sock\";\n");
  EXPECT_EQ(bind_texts(cfg), Strings{"10.0.0.1:11335"});
  EXPECT_EQ(cfg.expire_seconds, 30ull * 86400);
  EXPECT_EQ(allow_texts(cfg), (Strings{"10.0.0.0/8", "::1"}));
  EXPECT_EQ(cfg.hashfile, "/var/lib/shingled/fuzzy.db");
  EXPECT_EQ(cfg.max_hashes, 10000000u);
  EXPECT_EQ(cfg.workers, 4u);
  EXPECT_FALSE(cfg.pin_workers);
  EXPECT_EQ(cfg.io, IoBackendKind::recvmmsg);
  EXPECT_EQ(cfg.control_socket, "/run/shingled.sock");
}

TEST(ConfigOptions, json_document_is_accepted) {
  Config cfg = load_ok(R"({"bind_socket": ["127.0.0.1:1", "[::1]:1"], "expire": "1h",
                           "workers": "auto", "io": "uring"})");
  EXPECT_EQ(bind_texts(cfg), (Strings{"127.0.0.1:1", "[::1]:1"}));
  EXPECT_EQ(cfg.expire_seconds, 3600u);
  EXPECT_EQ(cfg.workers, 0u);
}

TEST(ConfigOptions, busy_poll_us_is_bounded) {
  EXPECT_EQ(load_ok("").busy_poll_us, 0u);
  EXPECT_EQ(load_ok("busy_poll_us = 500").busy_poll_us, 500u);
  expect_error("busy_poll_us = 2000000\n", 1, "busy_poll_us: must be at most 1000000");
}

TEST(ConfigOptions, sync_takes_a_duration_within_one_second_and_one_day) {
  EXPECT_EQ(load_ok("sync = 30").sync_seconds, 30u);
  EXPECT_EQ(load_ok("sync = 2min").sync_seconds, 120u);
  expect_error("sync = 0\n", 1, "sync: must be between 1s and 1d (got 0s)");
  expect_error("sync = 2d\n", 1, "sync: must be between 1s and 1d (got 172800s)");
}

TEST(ConfigOptions, hashfile_aliases_set_the_same_option) {
  EXPECT_EQ(load_ok("hash_file = /a").hashfile, "/a");
  EXPECT_EQ(load_ok("database = /b").hashfile, "/b");
  EXPECT_EQ(load_ok("file = /c").hashfile, "/c");
}

TEST(ConfigOptions, workers_accept_auto_and_numbers) {
  EXPECT_EQ(load_ok("workers = auto").workers, 0u);
  EXPECT_EQ(load_ok("workers = 0").workers, 0u);
  EXPECT_EQ(load_ok("workers = 16").workers, 16u);
}

TEST(ConfigBind, repeated_bind_socket_accumulates_in_order) {
  Config cfg = load_ok(
      "bind_socket = \"127.0.0.1:11335\";\n"
      "bind_socket = \"[::1]:11335\";\n"
      "bind_socket = [\"10.0.0.1:1\", \"10.0.0.2:2\"];\n");
  EXPECT_EQ(bind_texts(cfg),
            (Strings{"127.0.0.1:11335", "[::1]:11335", "10.0.0.1:1", "10.0.0.2:2"}));
}

TEST(ConfigBind, wildcard_bind_expands_to_both_families) {
  Config cfg = load_ok("bind_socket = \"*:11335\"");
  EXPECT_EQ(bind_texts(cfg), (Strings{"0.0.0.0:11335", "[::]:11335"}));
}

TEST(ConfigBind, same_address_twice_names_both_lines) {
  expect_error("bind_socket = \"127.0.0.1:1\";\n\nbind_socket = \"localhost:1\";\n", 3,
               "127.0.0.1:1 is listed twice, at lines 1 and 3");
}

TEST(ConfigBind, empty_bind_list_is_refused) {
  expect_error("\nbind_socket = [];\n", 2, "nothing to listen on");
}

TEST(ConfigBind, too_many_addresses_are_refused) {
  std::string text = "bind_socket = [\n";
  for (int i = 1; i <= 300; ++i) text += "  \"127.0.0.1:" + std::to_string(i) + "\",\n";
  text += "]\n";
  expect_error(text, 258, "more than 256 addresses");
}

TEST(ConfigBind, bad_address_reports_its_line) {
  expect_error("expire = 1d\nbind_socket = [\n  \"127.0.0.1:1\",\n  \"nonsense\"\n]\n", 4,
               "bind_socket: 'nonsense' is not a listen address");
  expect_error("bind_socket { a = 1 }", 1, "takes a string or an array of strings");
  expect_error("bind_socket = [[\"1.2.3.4:1\"]]", 1, "takes strings, not an array");
}

TEST(ConfigAllowUpdate, explicit_list_replaces_the_default) {
  Config cfg = load_ok("allow_update = [\"10.0.0.0/8\", \"2001:db8::/32\"];\n"
                       "allow_update = \"192.168.1.1\";\n");
  EXPECT_EQ(allow_texts(cfg), (Strings{"10.0.0.0/8", "2001:db8::/32", "192.168.1.1"}));
}

TEST(ConfigAllowUpdate, empty_array_means_nobody_may_write) {
  Config cfg = load_ok("allow_update = [];");
  EXPECT_TRUE(cfg.allow_update.empty()) << "[] must not fall back to the loopback default";
}

TEST(ConfigAllowUpdate, comma_separated_string_and_localhost_are_understood) {
  Config cfg = load_ok("allow_update = \"10.0.0.1, 10.0.0.2 localhost\";");
  EXPECT_EQ(allow_texts(cfg), (Strings{"10.0.0.1", "10.0.0.2", "localhost", "localhost"}));
  ASSERT_EQ(cfg.allow_update.size(), 4u);
  EXPECT_EQ(cfg.allow_update[2].family, AF_INET);
  EXPECT_EQ(cfg.allow_update[3].family, AF_INET6);
}

TEST(ConfigAllowUpdate, bad_entries_report_their_line) {
  expect_error("allow_update = [\n  \"10.0.0.0/8\",\n  \"10.0.0.1/8\",\n]\n", 3,
               "host bits");
  expect_error("\nallow_update = \"https://maps.example.com/fuzzy_allow.map\";\n", 2,
               "shingled reads maps from files only (it fetches nothing from the network)");
  expect_error("allow_update = \"file://fuzzy_allow.map\";\n", 1, "a map file needs an absolute path");
  expect_error("allow_update = \"\";", 1, "write [] to allow nobody");
}

TEST(ConfigWorkerBlock, named_worker_block_is_read) {
  Config cfg = load_ok(
      "worker \"fuzzy\" {\n"
      "  bind_socket = \"*:11335\";\n"
      "  count = 1;\n"
      "  type = \"fuzzy\";\n"
      "  expire = 90d;\n"
      "  allow_update = [\"127.0.0.1\"];\n"
      "}\n");
  EXPECT_EQ(bind_texts(cfg), (Strings{"0.0.0.0:11335", "[::]:11335"}));
  EXPECT_EQ(allow_texts(cfg), Strings{"127.0.0.1"});
}

TEST(ConfigWorkerBlock, typed_worker_block_is_read) {
  Config cfg = load_ok("worker {\n  type = fuzzy;\n  count = 2;\n  expire = 1w;\n}\n");
  EXPECT_EQ(cfg.expire_seconds, 7u * 86400);
}

TEST(ConfigWorkerBlock, unquoted_name_and_old_type_name_work) {
  EXPECT_EQ(load_ok("worker fuzzy { expire = 2d }").expire_seconds, 2u * 86400);
  EXPECT_EQ(load_ok("worker { type = fuzzy_storage; expire = 3d }").expire_seconds,
            3u * 86400);
}

TEST(ConfigWorkerBlock, other_worker_types_are_refused) {
  expect_error("worker \"normal\" {\n  count = 1;\n}\n", 1, "worker type 'normal'");
  expect_error("worker {\n  type = \"controller\";\n}\n", 2, "worker type 'controller'");
  expect_error("worker \"fuzzy\" {\n  type = \"normal\";\n}\n", 2, "worker type 'normal'");
}

TEST(ConfigWorkerBlock, worker_without_type_is_refused) {
  expect_error("\nworker {\n  expire = 1d;\n  count = 1;\n}\n", 2, "worker block without a type");
  expect_error("worker = 1", 1, "'worker' must be a block");
}

TEST(ConfigWorkerBlock, second_worker_block_names_the_first) {
  expect_error("worker \"fuzzy\" { }\n\nworker { type = fuzzy }\n", 3,
               "second fuzzy worker block (the first is at line 1)");
}

TEST(ConfigWorkerBlock, options_inside_the_block_are_checked_like_top_level_ones) {
  expect_error("worker \"fuzzy\" {\n  bogus = 1;\n}\n", 2, "unknown option 'bogus'");
  expect_error("worker \"fuzzy\" {\n  keypair {\n  }\n}\n", 2, "keypair: no pubkey");
  expect_error("expire = 1d\nworker \"fuzzy\" {\n  expire = 2d\n}\n", 3,
               "set twice, at lines 1 and 3");
  expect_error("worker fuzzy {\n  worker { type = fuzzy }\n}", 2, "cannot be nested");
}

TEST(ConfigErrors, unknown_option_is_refused_with_its_line) {
  expect_error("expire = 1d\n\nfoo = bar\n", 3, "unknown option 'foo'");
  expect_error("expires = 1d\n", 1, "did you mean 'expire'?");
}

TEST(ConfigErrors, unimplemented_rspamd_options_are_refused_not_ignored) {
  for (const char* option : {"master_timeout", "slave_key", "masters", "count", "type"}) {
    std::string text = "expire = 1d;\n" + std::string(option) + " = 1;\n";
    expect_error(text, 2, "option '" + std::string(option) + "' is not supported yet");
  }
}

TEST(ConfigKeypairs, rspamadm_output_is_accepted_as_it_is_and_the_first_is_the_default) {
  Config cfg;
  ConfigError err;
  ASSERT_TRUE(load_config_text(
      "keypair {\n"
      "    privkey = \"ez3idpzupqcpm9ioubgz3gifu6hoe3kfkrwxk8ff3jwrb6b9p8ty\";\n"
      "    pubkey = \"iua8hnti1drapuwcyd7txn8kbsngb5tsxg94yciuye1w4nt55ogy\";\n"
      "    encoding = \"base32\";\n"
      "    type = \"kex\";\n"
      "    algorithm = \"curve25519\";\n"
      "    id = \"6m91mnirpi4q\";\n"
      "}\n"
      "keypair { pubkey = \"aa\"; privkey = \"bb\"; encoding = \"hex\"; }\n"
      "encrypted_only = true;\nkeypair_cache_size = 4096;\n",
      "t.conf", cfg, err))
      << err.to_string();
  ASSERT_EQ(cfg.keypairs.size(), 2u);
  EXPECT_EQ(cfg.keypairs[0].pubkey, "iua8hnti1drapuwcyd7txn8kbsngb5tsxg94yciuye1w4nt55ogy");
  EXPECT_EQ(cfg.keypairs[0].line, 1);
  EXPECT_EQ(cfg.keypairs[1].encoding, "hex");
  EXPECT_EQ(cfg.keypairs[1].line, 9);
  EXPECT_TRUE(cfg.encrypted_only);
  EXPECT_EQ(cfg.keypair_cache_size, 4096u);
}

TEST(ConfigKeypairs, wrong_type_algorithm_or_fields_are_refused_with_their_line) {
  expect_error("keypair {\n pubkey = a;\n privkey = b;\n type = sign;\n}", 4, "needs a \"kex\" keypair");
  expect_error("keypair {\n pubkey = a;\n privkey = b;\n algorithm = nistp256;\n}", 4,
               "use curve25519");
  expect_error("keypair {\n pubkey = a;\n privkey = b;\n colour = red;\n}", 4,
               "unknown field 'colour'");
  expect_error("keypair {\n pubkey = a;\n}", 1, "keypair: no privkey");
  expect_error("keypair = \"abc\";", 1, "keypair must be a block");
}

TEST(ConfigErrors, duplicated_scalar_option_names_both_lines) {
  expect_error("expire = 1d;\nworkers = 2;\nexpire = 2d;\n", 3,
               "option 'expire' is set twice, at lines 1 and 3");
  expect_error("hashfile = /a\ndatabase = /b\n", 2,
               "option 'database' (same as 'hashfile') is set twice, at lines 1 and 2");
}

TEST(ConfigErrors, bad_values_report_the_value_line_and_reason) {
  expect_error("expire = 90x;", 1, "expire: '90x' is not a duration: unknown unit 'x'");
  expect_error("expire = 0;", 1, "at least 1s");
  expect_error("expire = [1d];", 1, "takes a single value, not an array");
  expect_error("\nmax_hashes = 0;", 2, "at least 1");
  expect_error("max_hashes = lots;", 1, "'lots' is not an unsigned integer");
  expect_error("max_memory = 100;", 1, "max_memory: must be at least 1mb");
  expect_error("max_hashes = 1M;\nmax_memory = 4gb;", 2,
               "max_memory and max_hashes (line 1) both set the capacity: keep one");
  expect_error("workers = many;", 1, "or \"auto\"");
  expect_error("workers = 100000;", 1, "maximum of 4096");
  expect_error("pin_workers = maybe;", 1, "'maybe' is not a boolean");
  expect_error("io = netmap;", 1, "use \"uring\", \"recvmmsg\" or \"dpdk\"");
  expect_error("hashfile = \"\";", 1, "the path is empty");
  expect_error("control_socket = \"" + std::string(200, 'x') + "\";", 1,
               "a Unix socket path may have");
}

TEST(ConfigDpdk, dpdk_backend_with_its_eal_arguments_ports_and_addresses) {
  Config cfg = load_ok(
      "io = dpdk;\n"
      "dpdk_eal_args = \"--no-huge -m 256  --no-pci\\t--vdev=net_af_packet0,iface=dkv0\";\n"
      "dpdk_ports = [\"net_af_packet0\", \"1\"];\n"
      "dpdk_addresses = [\"10.199.0.2/24\", \"192.0.2.7\"];\n"
      "bind_socket = [\"0.0.0.0:11335\", \"192.0.2.7:11336\"];\n");
  EXPECT_EQ(cfg.io, IoBackendKind::dpdk);
  EXPECT_EQ(cfg.io_line, 1);
  EXPECT_EQ(cfg.dpdk_eal_args,
            (Strings{"--no-huge", "-m", "256", "--no-pci", "--vdev=net_af_packet0,iface=dkv0"}));
  EXPECT_EQ(cfg.dpdk_ports, (Strings{"net_af_packet0", "1"}));
  EXPECT_EQ(cfg.dpdk_ports_line, 3);
  ASSERT_EQ(cfg.dpdk_addresses.size(), 2u);
  EXPECT_EQ(cfg.dpdk_addresses[0].ip, 0x0ac70002u);
  EXPECT_EQ(cfg.dpdk_addresses[0].prefix_len, 24);
  EXPECT_EQ(cfg.dpdk_addresses[1].ip, 0xc0000207u);
  EXPECT_EQ(cfg.dpdk_addresses[1].prefix_len, 32) << "a bare address is a /32";
  EXPECT_EQ(cfg.dpdk_addresses_line, 4);

  Config array = load_ok(
      "io = dpdk; dpdk_addresses = \"10.0.0.2\"; bind_socket = \"10.0.0.2:11335\";\n"
      "dpdk_eal_args = [\"--vdev=net_memif0,socket=/tmp/a b\", \"-l\", \"1\"];\n");
  EXPECT_EQ(array.dpdk_eal_args, (Strings{"--vdev=net_memif0,socket=/tmp/a b", "-l", "1"}))
      << "an array keeps each argument whole";
}

TEST(ConfigDpdk, dpdk_rss_picks_how_workers_get_queues) {
  const std::string base = "io = dpdk; dpdk_addresses = \"10.0.0.2/24\"; bind_socket = \"10.0.0.2:11335\";\n";
  EXPECT_EQ(load_ok(base).dpdk_rss, DpdkRss::auto_) << "the safe default";
  EXPECT_EQ(load_ok(base + "dpdk_rss = port;\n").dpdk_rss, DpdkRss::port);
  const Config spread = load_ok(base + "dpdk_rss = spread;\n");
  EXPECT_EQ(spread.dpdk_rss, DpdkRss::spread);
  EXPECT_EQ(spread.dpdk_rss_line, 2) << "start-up errors name the line";
  expect_error(base + "dpdk_rss = rss;\n", 2, "is not \"auto\"");
}

TEST(ConfigLoader, huge_pages_picks_the_fuzzy_tables_pages) {
  EXPECT_EQ(load_ok("").huge_pages, HugePages::transparent) << "nothing to reserve by default";
  EXPECT_EQ(load_ok("huge_pages = 2m;\n").huge_pages, HugePages::pages_2m);
  EXPECT_EQ(load_ok("huge_pages = 1g;\n").huge_pages, HugePages::pages_1g);
  EXPECT_EQ(load_ok("huge_pages = transparent;\n").huge_pages, HugePages::transparent);
  expect_error("expire = 1d;\nhuge_pages = 1G;\n", 2, "huge_pages: '1G' is not \"transparent\", \"2m\" or \"1g\"");
  expect_error("huge_pages = yes;\n", 1, "huge_pages: 'yes' is not");
}

TEST(ConfigDpdk, the_counters_default_follows_the_fuzzy_address_on_dpdk) {
  const Config cfg = load_ok(
      "io = dpdk; dpdk_addresses = \"10.0.0.2/24\"; bind_socket = \"10.0.0.2:11335\";\n");
  ASSERT_EQ(cfg.counters_bind_sockets.size(), 1u);
  EXPECT_EQ(format_sockaddr(reinterpret_cast<const sockaddr*>(&cfg.counters_bind_sockets[0].addr)),
            "10.0.0.2:11337") << "not loopback, which the NIC never sees";
  EXPECT_TRUE(load_ok("io = dpdk; dpdk_addresses = \"10.0.0.2\"; bind_socket = \"10.0.0.2:1\";\n"
                      "counters_bind_socket = [];\n")
                  .counters_bind_sockets.empty());
}

TEST(ConfigDpdk, dpdk_keys_without_io_dpdk_are_kept_for_later) {
  Config cfg = load_ok("dpdk_addresses = \"10.0.0.2/8\";\n");
  EXPECT_EQ(cfg.io, IoBackendKind::uring);
  EXPECT_EQ(cfg.dpdk_addresses.size(), 1u);
}

TEST(ConfigDpdk, ipv6_addresses_and_listeners) {
  const Config cfg = load_ok(
      "io = dpdk;\n"
      "dpdk_addresses = [\"10.0.0.2/24\", \"2001:db8::2/64\", \"fd00::2\"];\n"
      "bind_socket = [\"0.0.0.0:11335\", \"[::]:11335\", \"[2001:db8::2]:11345\"];\n");
  ASSERT_EQ(cfg.dpdk_addresses.size(), 3u);
  EXPECT_FALSE(cfg.dpdk_addresses[0].v6);
  EXPECT_TRUE(cfg.dpdk_addresses[1].v6);
  EXPECT_EQ(cfg.dpdk_addresses[1].prefix_len, 64);
  EXPECT_EQ(cfg.dpdk_addresses[1].ip6[0], 0x20);
  EXPECT_EQ(cfg.dpdk_addresses[1].ip6[15], 2);
  EXPECT_EQ(cfg.dpdk_addresses[2].prefix_len, 128) << "a bare IPv6 address is a /128";
  EXPECT_EQ(cfg.bind_sockets.size(), 3u);
  // "*:port" listens on both families, both wildcards of our addresses.
  EXPECT_EQ(load_ok("io = dpdk;\ndpdk_addresses = [\"10.0.0.2\", \"fd00::2\"];\nbind_socket = \"*:11335\";\n")
                .bind_sockets.size(),
            2u);
}

TEST(ConfigDpdk, bad_dpdk_settings_stop_start_up_at_their_line) {
  expect_error("io = dpdk;\nbind_socket = \"*:11335\";\n", 1, "io = dpdk needs dpdk_addresses");
  expect_error("io = dpdk;\ndpdk_addresses = \"10.0.0.2/24\";\n", 0,
               "127.0.0.1:11335 is not one of dpdk_addresses");
  expect_error("io = dpdk;\ndpdk_addresses = \"10.0.0.2/24\";\nbind_socket = \"10.0.0.3:1\";\n", 3,
               "10.0.0.3:1 is not one of dpdk_addresses");
  expect_error("io = dpdk;\ndpdk_addresses = \"10.0.0.2\";\nbind_socket = \"[2001:db8::9]:11335\";\n", 3,
               "[2001:db8::9]:11335 is not one of dpdk_addresses");
  expect_error("io = dpdk;\ndpdk_addresses = \"10.0.0.2\";\nbind_socket = \"0.0.0.0:1\";\n"
               "counters_bind_socket = \"10.9.9.9:2\";\n", 4, "10.9.9.9:2 is not one of dpdk_addresses");
  expect_error("dpdk_addresses = \"10.0.0.2/33\";", 1, "prefix length must be 0..32");
  expect_error("dpdk_addresses = \"2001:db8::1/129\";", 1, "prefix length must be 0..128");
  expect_error("dpdk_addresses = \"fe80::1/64\";", 1, "link-local");
  expect_error("dpdk_addresses = \"ff02::1\";", 1, "multicast");
  expect_error("dpdk_addresses = \"::1\";", 1, "loopback");
  expect_error("dpdk_addresses = \"2001:db8::zz\";", 1, "is not an IPv6 address");
  expect_error("dpdk_addresses = [\"2001:db8::1\", \"2001:DB8::1/64\"];", 1, "listed twice");
  expect_error("dpdk_addresses = \"eth0\";", 1, "is not an IPv4 or IPv6 address");
  expect_error("dpdk_addresses = [\"10.0.0.2\",\n \"127.0.0.1\"];", 2, "cannot be a host address");
  expect_error("dpdk_addresses = [\"10.0.0.2\", \"10.0.0.2/24\"];", 1, "listed twice");
  expect_error("dpdk_ports = \"a b\";", 1, "neither a port id nor a device name");
  expect_error("dpdk_ports = \"70000\";", 1, "port id 70000 is out of range");
  expect_error("dpdk_ports = [\"0\", \"0\"];", 1, "'0' is listed twice");
  expect_error("dpdk_eal_args = \"  \";", 1, "no argument given");
  expect_error("dpdk_eal_args = [\"-l\", \"--\"];", 1, "'--' is not an EAL argument");
  expect_error("dpdk_ports = \"0\";\ndpdk_ports = \"1\";", 2, "set twice, at lines 1 and 2");
  expect_error("dpdk_ports = { a = 1; };", 1, "takes a string or an array of strings");
}

TEST(ConfigErrors, syntax_errors_carry_line_and_column) {
  ConfigError error = load_error("expire = 1d;\nbind_socket = \"127.0.0.1:1;\n");
  EXPECT_EQ(error.line, 2);
  EXPECT_EQ(error.reason, "unterminated string (column 15)");
  expect_error("worker \"fuzzy\" {\n  expire = 1d;\n", 3,
               "expected '}' to close object opened at line 1");
  expect_error("expire = 1d\n.include \"$CONFDIR/worker-fuzzy.inc\"\n", 2,
               "'.include' is not supported");
}

TEST(ConfigErrors, to_string_is_path_line_reason) {
  ConfigError error;
  error.file = "/etc/shingled.conf";
  error.line = 7;
  error.reason = "unknown option 'foo'";
  EXPECT_EQ(error.to_string(), "/etc/shingled.conf:7: unknown option 'foo'");
  error.line = 0;
  EXPECT_EQ(error.to_string(), "/etc/shingled.conf: unknown option 'foo'");
}

TEST(ConfigErrors, failed_load_leaves_the_output_untouched) {
  Config cfg;
  cfg.max_hashes = 42;
  ConfigError error;
  EXPECT_FALSE(load_config_text("max_hashes = 5; bogus = 1", "x", cfg, error));
  EXPECT_EQ(cfg.max_hashes, 42u) << "a refused config must not be half-applied";
}

TEST(ConfigFile, reads_a_file_and_reports_missing_ones) {
  char path[] = "/tmp/shingled_config_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "expire = 2h;\nbind_socket = \"127.0.0.1:9\";\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  Config cfg;
  ConfigError error;
  EXPECT_TRUE(load_config_file(path, cfg, error)) << error.to_string();
  EXPECT_EQ(cfg.expire_seconds, 7200u);
  EXPECT_EQ(cfg.source, path);
  unlink(path);

  EXPECT_FALSE(load_config_file(path, cfg, error)) << "the file was deleted";
  EXPECT_EQ(error.line, 0);
  EXPECT_EQ(error.file, path);
  EXPECT_NE(error.reason.find("cannot open"), std::string::npos) << error.to_string();
  EXPECT_FALSE(load_config_file("/tmp", cfg, error));
  EXPECT_NE(error.reason.find("not a regular file"), std::string::npos) << error.to_string();
}

TEST(ConfigFile, syntax_error_in_a_file_names_the_file) {
  char path[] = "/tmp/shingled_config_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "expire = 2h;\n\nnope = 1;\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  Config cfg;
  ConfigError error;
  EXPECT_FALSE(load_config_file(path, cfg, error));
  EXPECT_EQ(error.to_string(), std::string(path) + ":3: unknown option 'nope'");
  unlink(path);
}

// The shipped example must stay loadable: it documents every option.
TEST(ConfigFile, shipped_example_config_loads) {
  const std::string path = std::string(SHINGLED_SOURCE_DIR) + "/scripts/shingled.conf.example";
  ASSERT_EQ(access(path.c_str(), R_OK), 0) << "example config not found at " << path;
  Config cfg;
  ConfigError error;
  EXPECT_TRUE(load_config_file(path, cfg, error)) << error.to_string();
  EXPECT_FALSE(cfg.bind_sockets.empty());
}

// --- shingle counters ---------------------------------------------------------

TEST(ConfigCounters, the_counter_service_listens_on_loopback_11337_by_default) {
  const Config cfg = default_config();
  ASSERT_EQ(cfg.counters_bind_sockets.size(), 1u);
  EXPECT_EQ(format_sockaddr(reinterpret_cast<const sockaddr*>(&cfg.counters_bind_sockets[0].addr)),
            "127.0.0.1:11337");
  EXPECT_EQ(cfg.counters_max, 1'000'000u);
  EXPECT_EQ(cfg.counters_ten_minute_periods, 144u);
  EXPECT_EQ(cfg.counters_daily_periods, 14u);
}

TEST(ConfigCounters, options_set_the_listeners_capacity_and_retention) {
  const Config cfg = load_ok(
      "counters_bind_socket = [\"127.0.0.1:5000\", \"[::1]:5000\"];\n"
      "counters_max = 2m;\ncounters_ten_minute_periods = 288;\ncounters_daily_periods = 30;\n");
  EXPECT_EQ(cfg.counters_bind_sockets.size(), 2u);
  EXPECT_EQ(cfg.counters_max, 2'000'000u);
  EXPECT_EQ(cfg.counters_ten_minute_periods, 288u);
  EXPECT_EQ(cfg.counters_daily_periods, 30u);
  EXPECT_TRUE(load_ok("counters_bind_socket = [];\n").counters_bind_sockets.empty())
      << "an empty list turns the service off";
}

TEST(ConfigCounters, bad_values_are_refused_at_their_line) {
  expect_error("workers = 1;\ncounters_max = 0;\n", 2, "counters_max: must be 1..2^36");
  expect_error("counters_daily_periods = 367;\n", 1, "must be 1..366");
  expect_error("counters_ten_minute_periods = 0;\n", 1, "must be 1..2016");
  expect_error("counters_bind_socket = \"127.0.0.1:99999\";\n", 1, "counters_bind_socket");
  expect_error("bind_socket = \"127.0.0.1:7000\";\ncounters_bind_socket = \"127.0.0.1:7000\";\n", 2,
               "listed twice");
}

TEST(ConfigCounters, a_fuzzy_listener_on_the_counters_default_port_says_what_to_do) {
  expect_error("\nbind_socket = \"127.0.0.1:11337\";\n", 2,
               "the service listens there by default: set counters_bind_socket");
}

// rspamd's per-network limit of the fuzzy worker (its ratelimit_* options):
// off unless rate and burst are both set; a half-set limit is an error.
TEST(ConfigAccessControl, the_per_network_limit_takes_rspamds_options) {
  const Config off = load_ok("");
  EXPECT_EQ(off.limit_burst, 0.0);
  EXPECT_EQ(off.limit_network_mask, 24u);
  EXPECT_EQ(off.limit_bucket_ttl_seconds, 3600u);
  EXPECT_EQ(off.limit_max_buckets, 2000u);
  const Config c = load_ok("ratelimit_rate = 0.5;\nratelimit_burst = 100;\nratelimit_network_mask = 16;\n"
                           "ratelimit_bucket_ttl = 10min;\nratelimit_max_buckets = 5000;\n"
                           "ratelimit_whitelist = [\"192.0.2.0/24\", \"/etc/rspamd/rl_white.map\"];\n"
                           "ratelimit_log_only = true;\n");
  EXPECT_EQ(c.limit_rate, 0.5);
  EXPECT_EQ(c.limit_burst, 100.0);
  EXPECT_EQ(c.limit_network_mask, 16u);
  EXPECT_EQ(c.limit_bucket_ttl_seconds, 600u);
  EXPECT_EQ(c.limit_max_buckets, 5000u);
  EXPECT_EQ(c.limit_whitelist.size(), 1u);
  EXPECT_EQ(c.map_files.ratelimit_whitelist, (Strings{"/etc/rspamd/rl_white.map"}));
  EXPECT_TRUE(c.limit_log_only);
  EXPECT_EQ(load_ok("ratelimit_rate = 0;\nratelimit_burst = 10;\n").limit_burst, 10.0) << "no leak: burst per ttl";
  expect_error("ratelimit_rate = 100;\n", 1, "ratelimit_rate is set but ratelimit_burst is not");
  expect_error("expire = 1d;\nratelimit_burst = 100;\n", 2, "ratelimit_burst is set but ratelimit_rate is not");
  expect_error("ratelimit_rate = inf;\nratelimit_burst = 1;\n", 1, "must be finite");
  expect_error("ratelimit_rate = -1;\nratelimit_burst = 1;\n", 1, "ratelimit_rate: must be");
  expect_error("ratelimit_rate = 1;\nratelimit_burst = 0.5;\n", 2, "ratelimit_burst: must be");
  expect_error("ratelimit_network_mask = 33;\n", 1, "ratelimit_network_mask: must be");
}

}  // namespace
}  // namespace shingled

// ---- Rate limits (issue 6) ----

namespace shingled {
namespace {

TEST(ConfigRatelimit, defaults_limit_nothing_and_listen_on_loopback_11336) {
  const Config cfg = default_config();
  ASSERT_EQ(cfg.ratelimit_service_bind_sockets.size(), 1u);
  EXPECT_EQ(format_sockaddr(reinterpret_cast<const sockaddr*>(&cfg.ratelimit_service_bind_sockets[0].addr)),
            "127.0.0.1:11336");
  EXPECT_EQ(cfg.ratelimit_service_max_buckets, 1'000'000u);
  for (const auto& family : cfg.ratelimit.rates) EXPECT_TRUE(family.empty());
  EXPECT_EQ(cfg.ratelimit.whitelisted_rcpts, (std::vector<std::string>{"postmaster", "mailer-daemon"}));
  EXPECT_EQ(cfg.ratelimit.bounce_senders.size(), 6u);
  EXPECT_EQ(cfg.ratelimit.max_rcpts, 5u);
  EXPECT_EQ(cfg.ratelimit.compat, RatelimitCompat::rspamd);
  EXPECT_EQ(cfg.ratelimit.expire_seconds, 172'800u);
  EXPECT_FALSE(cfg.ratelimit.dynamic_rate_limit);
}

TEST(ConfigRatelimit, every_rspamd_rates_form_is_read) {
  const Config cfg = load_ok(
      "ratelimit_bind_socket = \"127.0.0.1:11336\";\n"  // the old name, an alias
      "ratelimit_service_max_buckets = 2m;\n"
      "ratelimit {\n"
      "  rates {\n"
      "    to = [100, 0.033333333];\n"
      "    to_ip = \"30 / 1min\";\n"
      "    to_ip_from = { bucket = { burst = 20; rate = \"1 / 1m\"; } }\n"
      "    bounce_to = { bucket = [ \"10 / 1h\", { burst = 5; rate = 0.5; } ] }\n"
      "    bounce_to_ip = [0, 0.000277778];\n"
      "    user = { bucket = \"1k / 1d\"; }\n"
      "  }\n"
      "  whitelisted_rcpts = \"postmaster, abuse\";\n"
      "  whitelisted_ip = [\"10.0.0.0/8\", \"2001:db8::/32\", \"192.0.2.1\"];\n"
      "  bounce_senders = [\"\", \"mailer-daemon\"];\n"
      "  max_rcpts = 3;\n"
      "  compat = \"per_recipient\";\n"
      "  expire = 1h;\n"
      "  reservation_lease = 30s;\n"
      "  dynamic_rate_limit = true;\n"
      "  ham_factor_rate = 1.05;\n"
      "}\n");
  const RatelimitConfig& r = cfg.ratelimit;
  ASSERT_EQ(cfg.ratelimit_service_bind_sockets.size(), 1u);
  EXPECT_EQ(cfg.ratelimit_service_max_buckets, 2'000'000u);
  auto family = [&](RateFamily f) { return r.rates[size_t(f) - 1]; };
  ASSERT_EQ(family(RateFamily::to).size(), 1u);
  EXPECT_EQ(family(RateFamily::to)[0].burst, 100);
  EXPECT_DOUBLE_EQ(family(RateFamily::to)[0].rate, 0.033333333);
  EXPECT_DOUBLE_EQ(family(RateFamily::to_ip)[0].rate, 0.5);
  EXPECT_EQ(family(RateFamily::to_ip_from)[0].burst, 20);
  EXPECT_DOUBLE_EQ(family(RateFamily::to_ip_from)[0].rate, 1.0 / 60);
  ASSERT_EQ(family(RateFamily::bounce_to).size(), 2u);
  EXPECT_DOUBLE_EQ(family(RateFamily::bounce_to)[0].rate, 10.0 / 3600);
  EXPECT_EQ(family(RateFamily::bounce_to)[1].burst, 5);
  EXPECT_TRUE(family(RateFamily::bounce_to_ip).empty()) << "burst 0 disables, as in rspamd";
  EXPECT_EQ(family(RateFamily::user)[0].burst, 1000);
  EXPECT_EQ(r.whitelisted_rcpts, (std::vector<std::string>{"postmaster", "abuse"}));
  EXPECT_EQ(r.whitelisted_ip.size(), 3u);
  EXPECT_EQ(r.bounce_senders, (std::vector<std::string>{"", "mailer-daemon"}));
  EXPECT_EQ(r.max_rcpts, 3u);
  EXPECT_EQ(r.compat, RatelimitCompat::per_recipient);
  EXPECT_EQ(r.expire_seconds, 3600u);
  EXPECT_EQ(r.reservation_lease_seconds, 30u);
  EXPECT_TRUE(r.dynamic_rate_limit);
  EXPECT_EQ(r.ham_factor_rate, 1.05);
}

TEST(ConfigRatelimit, rate_strings_are_read_strictly) {
  struct Case {
    const char* text;
    double burst, rate;
  };
  for (const Case& c : {Case{"3 / 1min", 3, 0.05}, Case{"100/1h", 100, 100.0 / 3600},
                        Case{"1k / 1d", 1000, 1000.0 / 86400}, Case{"10 / 1.5m", 10, 10.0 / 90},
                        Case{"5 / 30", 5, 5.0 / 30}, Case{"2m / 1d", 2e6, 2e6 / 86400},
                        Case{"3 /1m", 3, 0.05}, Case{"1.5 / 1s", 1.5, 1.5}}) {
    RateBucket b;
    std::string err;
    ASSERT_TRUE(parse_rate_string(c.text, b, err)) << c.text << ": " << err;
    EXPECT_EQ(b.burst, c.burst) << c.text;
    EXPECT_NEAR(b.rate, c.rate, 1e-12) << c.text;
  }
  for (const char* bad : {"1 / 1w", "10 / 1 min", "-3 / 1m", " 3 / 1m", "1 / 0s", "5 per minute",
                          "", "/ 1m", "3 / m"}) {
    RateBucket b;
    std::string err;
    EXPECT_FALSE(parse_rate_string(bad, b, err)) << "'" << bad << "' was accepted";
    EXPECT_FALSE(err.empty());
  }
}

TEST(ConfigRatelimit, mistakes_stop_start_up_with_line_and_reason) {
  expect_error("ratelimit {\n  rates {\n    my_limit = \"1 / 1m\";\n  }\n}\n", 3,
               "'my_limit' is not a family");
  expect_error("ratelimit {\n  rates {\n    to = { selector = \"ip\"; bucket = \"1 / 1m\"; }\n  }\n}\n",
               3, "selectors are not supported");
  expect_error("ratelimit {\n  rates {\n    to = { bucket = [\"10 / 1m\", \"10 / 1h\"]; }\n  }\n}\n",
               3, "same burst");
  expect_error("ratelimit {\n  rates {\n    to = \"10 / 1 min\";\n  }\n}\n", 3,
               "unknown period unit ' min'");
  expect_error("ratelimit {\n  rates {\n    to = [-1, 1];\n  }\n}\n", 3, "burst must be > 0");
  expect_error("ratelimit {\n  rates {\n    to = [10, 0];\n  }\n}\n", 3, "rate must be > 0");
  expect_error("ratelimit {\n  rates {\n    to { bucket { burst = 1; rate = 1; symbol = X; } }\n  }\n}\n",
               3, "bucket field 'symbol'");
  expect_error("ratelimit {\n  max_rcpts = 33;\n}\n", 2, "max_rcpts: must be 1..32");
  expect_error("ratelimit {\n  compat = \"redis\";\n}\n", 2, "compat: 'redis'");
  // The old default skipped the limits past max_rcpts recipients: refused
  // by name, never quietly reread as something else.
  expect_error("ratelimit {\n  compat = \"shingled\";\n}\n", 2, "skip every limit");
  expect_error("ratelimit {\n  whitelisted_ip = \"10.0.0.1/8\";\n}\n", 2, "whitelisted_ip");
  expect_error("ratelimit {\n  whitelisted_rcpts = \"/etc/rcpts.map\";\n}\n", 2, "maps");
  expect_error("ratelimit {\n  symbol = \"RL\";\n}\n", 2, "unknown option 'symbol'");
  expect_error("ratelimit {\n  max_rcpts = 2;\n  max_rcpts = 3;\n}\n", 3, "set twice");
  expect_error("ratelimit {\n  expire = 0;\n}\n", 2, "expire: must be 1s..366d");
  expect_error("ratelimit = 5;\n", 1, "must be a block");
  expect_error(
      "ratelimit {\n  max_rcpts = 20;  compat = \"per_recipient\";\n  rates {\n    to = { bucket = [\"1 / 1m\", \"2 / 1m\"]; }\n"
      "    to_ip = { bucket = [\"1 / 1m\", \"2 / 1m\"]; }\n  }\n}\n",
      1, "80 buckets per message");
  expect_error("ratelimit_bind_socket = \"127.0.0.1:11335\";\n", 1,
               "is also the fuzzy storage's bind_socket");
  expect_error("ratelimit_service_bind_socket = \"127.0.0.1:99999\";\n", 1, "ratelimit_service_bind_socket");
  expect_error("ratelimit_service_max_buckets = 0;\n", 1, "ratelimit_service_max_buckets: must be");
}

// Current rspamd's stock fuzzy worker (rspamd.conf's block with
// worker-fuzzy.inc pasted in) loads: `backend` and the Redis options are
// accepted with a warning each, since shingled keeps its data in hashfile
// whatever they say.
TEST(ConfigStockWorker, stock_worker_block_loads_with_a_warning_per_redis_option) {
  Config cfg;
  ConfigError err;
  ASSERT_TRUE(load_config_text("worker \"fuzzy\" {\n"
                               "  bind_socket = \"localhost:11335\";\n"
                               "  count = -1;\n"
                               "  backend = \"redis\";\n"
                               "  expire = 90d;\n"
                               "  allow_update = [\"localhost\"];\n"
                               "  servers = \"127.0.0.1:6379\";\n"
                               "}\n",
                               "stock.conf", cfg, err))
      << err.to_string();
  EXPECT_EQ(bind_texts(cfg), (Strings{"127.0.0.1:11335", "[::1]:11335"}));
  EXPECT_EQ(cfg.expire_seconds, 90u * 86400);
  EXPECT_EQ(allow_texts(cfg), (Strings{"localhost", "localhost"}));
  ASSERT_EQ(cfg.warnings.size(), 2u);
  EXPECT_EQ(cfg.warnings[0].rfind("stock.conf:4: option 'backend' = \"redis\" is ignored: shingled keeps "
                                  "its data in hashfile (LMDB)", 0), 0u) << cfg.warnings[0];
  EXPECT_EQ(cfg.warnings[1].rfind("stock.conf:7: option 'servers' is ignored: ", 0), 0u) << cfg.warnings[1];
  EXPECT_TRUE(load_ok("backend = sqlite;\n").warnings.size() == 1u);
  EXPECT_TRUE(load_ok("expire = 1d;\n").warnings.empty());
}

TEST(ConfigStockWorker, strict_config_refuses_what_would_be_ignored_wherever_it_stands) {
  expect_error("backend = \"redis\";\nstrict_config = true;\n", 1,
               "option 'backend' = \"redis\" is ignored: shingled keeps its data in hashfile");
  expect_error("strict_config = yes;\nexpire = 1d;\npassword = \"x\";\n", 3,
               "(refused: strict_config = true)");
  expect_error("backend = \"noop\";\n", 1, "backend: 'noop' is not rspamd's \"redis\" or \"sqlite\"");
  expect_error("backend = [redis];\n", 1, "option 'backend' takes a single value, not an array");
}

TEST(ConfigAccessControl, read_only_forbidden_ids_and_delay_as_rspamd_writes_them) {
  Config cfg = load_ok("read_only = true;\nforbidden_ids = [2, 3];\nforbidden_ids = \"7, 3\";\n"
                       "delay = 1h;\ndelay_whitelist = [\"10.0.0.0/8\", \"localhost\"];\n");
  EXPECT_TRUE(cfg.read_only);
  EXPECT_EQ(cfg.forbidden_ids, (std::vector<uint32_t>{2, 3, 7})) << "repeatable, duplicates once";
  EXPECT_EQ(cfg.delay_seconds, 3600u);
  EXPECT_EQ(cfg.delay_whitelist.size(), 3u);
  EXPECT_EQ(load_ok("forbidden_ids = 5;\n").forbidden_ids, (std::vector<uint32_t>{5}));
  const Config none = load_ok("");
  EXPECT_FALSE(none.read_only);
  EXPECT_TRUE(none.forbidden_ids.empty());
  EXPECT_EQ(none.delay_seconds, 0u) << "delay is off unless set";
  expect_error("forbidden_ids = [1, x];\n", 1, "forbidden_ids: 'x' is not a flag");
  expect_error("forbidden_ids = 4294967296;\n", 1, "is not a flag");
  expect_error("delay = 0;\n", 1, "delay: must be between 1s and 366d");
  expect_error("delay_whitelist = \"http://example.com/delay.map\";\n", 1, "reads maps from files only");
  expect_error("read_only = sometimes;\n", 1, "'sometimes' is not a boolean");
}

TEST(ConfigAccessControl, blocked_and_skip_hashes_inline) {
  const std::string d1(128, 'a'), d2(128, '0');
  Config cfg = load_ok("blocked = [\"192.0.2.0/24\", \"2001:db8::/32\"];\nskip_hashes = \"" + d1 + ", " + d2 + "\";\n");
  EXPECT_EQ(cfg.blocked.size(), 2u);
  ASSERT_EQ(cfg.skip_hashes.size(), 2u);
  EXPECT_EQ(cfg.skip_hashes[0], std::string(64, char(0xaa)));
  expect_error("skip_hashes = \"abc\";\n", 1, "skip_hashes: 'abc' is not a digest of 128 hex digits");
  expect_error("skip_hashes = \"https://example.com/skip.map\";\n", 1, "reads maps from files only");
  expect_error("blocked = \"10.0.0.1/8\";\n", 1, "blocked:");
  std::string many = "blocked = [";
  for (int i = 0; i < 4097; ++i) many += "\"10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".1\", ";
  expect_error(many + "];\n", 1, "blocked: more than 4096 inline addresses and networks (put a longer list in a map file)");
}

// rspamd's map syntax: a string that is an absolute path or a file:// URL
// names a file (read later, by the MapLoader), anything else is inline;
// both may be mixed, in one array or over repeated settings.
TEST(ConfigAccessControl, map_files_are_remembered_beside_inline_entries) {
  Config cfg = load_ok("blocked = [\"192.0.2.1\", \"/etc/rspamd/fuzzy_blocked.map\"];\n"
                       "blocked = \"file:///etc/rspamd/more_blocked.map\";\n"
                       "allow_update = \"file:///etc/rspamd/writers.map\";\n"
                       "delay_whitelist = \"/etc/rspamd/delay_whitelist.map\";\n"
                       "skip_hashes = \"/etc/rspamd/skip.map\";\n");
  EXPECT_EQ(cfg.blocked.size(), 1u);
  EXPECT_EQ(cfg.map_files.blocked,
            (Strings{"/etc/rspamd/fuzzy_blocked.map", "/etc/rspamd/more_blocked.map"}));
  EXPECT_TRUE(cfg.allow_update.empty()) << "a map replaces the default localhost";
  EXPECT_EQ(cfg.map_files.allow_update, (Strings{"/etc/rspamd/writers.map"}));
  EXPECT_EQ(cfg.map_files.delay_whitelist, (Strings{"/etc/rspamd/delay_whitelist.map"}));
  EXPECT_EQ(cfg.map_files.skip_hashes, (Strings{"/etc/rspamd/skip.map"}));
  EXPECT_EQ(cfg.max_map_entries, 1000000u);
  expect_error("max_map_entries = 0;\n", 1, "max_map_entries");
}

// TCP beside UDP (rspamd 3.14+) is io_uring's: on by default there, off by
// default with the other backends, and a mistake when asked for with them.
TEST(ConfigTcp, tcp_follows_the_backend_and_is_refused_where_it_cannot_be_served) {
  Config cfg = load_ok("");
  EXPECT_TRUE(cfg.tcp);
  EXPECT_EQ(cfg.tcp_timeout_seconds, 5u);
  EXPECT_EQ(cfg.tcp_max_connections, 1024u);
  EXPECT_FALSE(load_ok("io = recvmmsg;\n").tcp) << "off by default there";
  EXPECT_FALSE(load_ok("tcp = false;\n").tcp);
  EXPECT_EQ(load_ok("tcp_timeout = 1min;\ntcp_max_connections = 10;\n").tcp_timeout_seconds, 60u);
  expect_error("io = recvmmsg;\ntcp = true;\n", 2, "tcp = true needs io = uring: the recvmmsg backend serves UDP only");
  expect_error("tcp = yes;\nio = dpdk;\ndpdk_addresses = \"10.0.0.2\";\nbind_socket = \"10.0.0.2:11335\";\n", 1,
               "with io = dpdk the NIC's traffic never reaches the kernel's TCP");
  expect_error("tcp_timeout = 0;\n", 1, "tcp_timeout: must be between 1s and 1h");
  expect_error("tcp_max_connections = 70000;\n", 1, "tcp_max_connections: must be 1..65535");
}

TEST(ConfigStockWorker, other_worker_options_are_refused_with_their_reason) {
  expect_error("dedicated_update_worker = true;\n", 1, "there is no update worker to dedicate");
  expect_error("updates_maxfail = 3;\n", 1, "a failed sync is retried until it commits");
  expect_error("rlimit_nofile = 100000;\n", 1, "LimitNOFILE");
}

// rspamd's keypair extensions, and the options that grant writes by key.
TEST(ConfigAccessControl, keypair_extensions_are_read_with_rspamds_semantics) {
  const std::string keys =
      "  pubkey = \"k4nz984k36xmcynm1hr9kdbn6jhcxf4ggbrb1quay7f88rpm9kay\";\n"
      "  privkey = \"oswsyhhf9xzjb7bgggmgohs7gfzbgzk6cjdwxy45y7j6ab5mcp6y\";\n";
  const Config c = load_ok("keypair {\n" + keys +
                           "  extensions {\n    name = \"learner\";\n    allowed_ops = [\"Write\", \"delete\"];\n"
                           "    forbidden_ids = [3, 4];\n    ratelimit = \"100 / 1h\";\n"
                           "    expire = \"31-12-2030\";\n    email = \"ops@example.com\";\n  }\n}\n"
                           "weak_ids = [7, 8];\n");
  ASSERT_EQ(c.keypairs.size(), 1u);
  const KeyExtensions& e = c.keypairs[0].extensions;
  EXPECT_EQ(e.name, "learner");
  EXPECT_EQ(e.ops, kKeyWrite | kKeyDelete) << "allowed_ops replaces the read default";
  EXPECT_TRUE(e.forbidden_given);
  EXPECT_EQ(e.forbidden_ids, (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(e.limit_burst, 100.0);
  EXPECT_DOUBLE_EQ(e.limit_rate, 100.0 / 3600);
  EXPECT_EQ(e.expire_unix, 1924905600u) << "00:00 UTC, 31 December 2030";
  EXPECT_EQ(c.weak_ids, (std::vector<uint32_t>{7, 8}));
  EXPECT_FALSE(c.allow_update_given);
  EXPECT_EQ(load_ok("keypair {\n" + keys + "  extensions { read_only = false; }\n}\n").keypairs[0].extensions.ops,
            kKeyRead | kKeyWrite | kKeyDelete);
  EXPECT_EQ(load_ok("keypair {\n" + keys + "  extensions { ratelimit = { burst = 5; rate = 0.5; } }\n}\n")
                .keypairs[0].extensions.limit_burst, 5.0);
  EXPECT_TRUE(load_ok("allow_update = [\"10.0.0.1\"];\n").allow_update_given);
  expect_error("keypair {\n" + keys + "  extensions {\n    allowed_ops = [\"read\", \"wirte\"];\n  }\n}\n", 5,
               "allowed_ops: 'wirte' is not an operation (read, write, delete)");
  expect_error("keypair {\n" + keys + "  extensions { expire = \"2030-12-31\"; }\n}\n", 4,
               "expire: '2030-12-31' is not a day as DD-MM-YYYY");
  expect_error("keypair {\n" + keys + "  extensions { colour = blue; }\n}\n", 4, "unknown field 'colour'");
  expect_error("keypair {\n" + keys + "  extensions { forbidden_ids = [1,2,3,4,5,6,7,8,9]; }\n}\n", 4,
               "more than 8 flags for one key");
  expect_error("allow_update_keys = \"abc\";\n", 1, "is not a keypair id");
  expect_error("dynamic_keys_map = \"https://example.com/keys.json\";\n", 1, "fetches nothing from the network");
  expect_error("dynamic_keys_map = \"keys.json\";\n", 1, "is not a file");
  expect_error("weak_ids = x;\n", 1, "weak_ids: 'x' is not a flag");
}

// The cluster block (docs/cluster.md): servers and node are required, every
// value checked where it is written.
TEST(ConfigCluster, a_block_with_servers_and_node_turns_the_cluster_on) {
  const Config none = load_ok("");
  EXPECT_FALSE(none.cluster.enabled);
  const Config c = load_ok(
      "cluster {\n  servers = [\"nats://10.0.0.1:4222\", \"nats://10.0.0.2:4222\"];\n  node = \"mx-1\";\n"
      "  replicas = 5;\n  stream = \"FUZZY_A\";\n}\n");
  EXPECT_TRUE(c.cluster.enabled);
  EXPECT_EQ(c.cluster.servers, (std::vector<std::string>{"nats://10.0.0.1:4222", "nats://10.0.0.2:4222"}));
  EXPECT_EQ(c.cluster.node, "mx-1");
  EXPECT_EQ(c.cluster.replicas, 5);
  EXPECT_EQ(c.cluster.stream, "FUZZY_A");
  const Config one = load_ok("cluster { servers = \"nats://127.0.0.1:4222\"; node = n1; }\n");
  EXPECT_EQ(one.cluster.servers.size(), 1u);
  const Config listed = load_ok("cluster { servers = \"nats://a:1,nats://b:2\"; node = n1; }\n");
  EXPECT_EQ(listed.cluster.servers, (std::vector<std::string>{"nats://a:1", "nats://b:2"}));
  EXPECT_EQ(one.cluster.replicas, 3);
  EXPECT_EQ(one.cluster.stream, "SHINGLED_FUZZY");
  EXPECT_EQ(one.cluster.ready_lag, 1000u);
  EXPECT_EQ(load_ok("cluster { servers = \"nats://a:1\"; node = n1; ready_lag = 0; }\n").cluster.ready_lag, 0u);
  EXPECT_EQ(one.cluster.snapshot_period_seconds, 3600u);
  EXPECT_EQ(load_ok("cluster { servers = \"nats://a:1\"; node = n1; snapshot_period = 0; }\n").cluster.snapshot_period_seconds, 0u);
  EXPECT_EQ(load_ok("cluster { servers = \"nats://a:1\"; node = n1; snapshot_period = 30min; }\n").cluster.snapshot_period_seconds, 1800u);
}

TEST(ConfigCluster, a_bad_cluster_block_is_refused_at_its_line) {
  expect_error("cluster {\n  node = n1;\n}\n", 1, "'servers' is required");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n}\n", 1, "'node' is required");
  expect_error("cluster {\n  servers = [\"http://a:1\"];\n  node = n1;\n}\n", 2, "not a nats:// or tls:// URL");
  expect_error("cluster {\n  servers = [];\n  node = n1;\n}\n", 2, "the list is empty");
  expect_error("cluster {\n  servers = \"nats://a:1,\";\n  node = n1;\n}\n", 2, "not a nats:// or tls:// URL: \"\"");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = \"my node\";\n}\n", 3, "node: 1 to 64");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  replicas = 7;\n}\n", 4, "1 to 5");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  stream = \"a.b\";\n}\n", 4,
               "not a JetStream stream name");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  leader = yes;\n}\n", 4,
               "unknown option 'leader'");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  node = n2;\n}\n", 4, "set twice");
  expect_error("cluster = 3;\n", 1, "must be a block");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  ready_lag = -1;\n}\n", 4, "ready_lag");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  ready_lag = 1e10;\n}\n", 4, "ready_lag");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  snapshot_period = 5s;\n}\n", 4, "snapshot_period: 0 (never) or 10 s to 7 days");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  snapshot_period = 8d;\n}\n", 4, "snapshot_period");
  expect_error("cluster {\n  servers = \"nats://a:1\";\n  node = n1;\n  snapshot_period = soon;\n}\n", 4, "snapshot_period");
}

}  // namespace
}  // namespace shingled
