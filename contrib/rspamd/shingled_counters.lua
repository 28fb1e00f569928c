--[[
shingled_counters: rspamd learns and scores by shingle statistics kept in
shingled's counter service (docs/counters-plugin.md; the wire protocol is
docs/counters.md).

Per message, at scan time, the plugin hashes the message's features (From,
its domain, the envelope sender, the client IP and network, HELO, the
normalised subject, URL hosts and domains, attachment names and digests,
DKIM signing domains, the Message-ID's shape) into typed 64-bit shingles
and sends ONE increment-and-read: the `seen` counter of each goes up, and
its `seen`, `spam`, `ham` and complaint figures come back as they were
before this message, with the unique counters (distinct recipients per
sender, distinct senders per client IP). Rules turn the figures into
symbols. After the verdict, one increment of the `spam` or `ham` counters;
`rspamc learn_spam` / `learn_ham` (through a classifier's learn_condition)
increments the complaint counters.

Never changes a verdict because shingled is slow or gone: the scan goes on
with no symbol and a log line. Retransmits resend identical datagrams,
which shingled answers from its reply cache without counting twice.
Works on rspamd 3.4 (LuaJIT, no string.pack) and on current rspamd.
]]--

if confighelp then
  return
end

local N = 'shingled_counters'
local rspamd_logger = require "rspamd_logger"
local rspamd_udp = require "rspamd_udp"
local rspamd_text = require "rspamd_text"
local rspamd_upstream_list = require "rspamd_upstream_list"
local rspamd_hash = require "rspamd_cryptobox_hash"
local lua_util = require "lua_util"

local settings = {
  servers = '127.0.0.1:11337',
  timeout = 1.0,
  retransmits = 2,
  prefix = 'mail',
  -- the features sent, by name (FEATURES below)
  features = { 'from', 'from_domain', 'env_from', 'ip', 'ip_net', 'helo', 'subject',
               'url_host', 'url_domain', 'attachment_name', 'attachment_digest',
               'dkim_domain', 'message_id_shape' },
  max_values = 4,          -- per multi-valued feature (URLs, attachments)
  max_rcpts = 16,          -- recipients counted for the fan-out counter
  spam_actions = { 'reject', 'add header', 'rewrite subject' },
  ham_actions = { 'no action' },
  symbol_prefix = '',      -- prepended to the default rules' symbols (none)
  allow_local = false,     -- also count scans from rspamc / the controller
  rules = nil,             -- nil: DEFAULT_RULES
}

-- Feature type numbers: the founding article's where it gives them (8
-- subject, 14 From, 15 IP, 42 attachment name, 62 attachment checksum).
-- Each statistic of a feature is its own counter, type + offset.
local FEATURE_TYPES = {
  subject = 8, from_domain = 13, from = 14, ip = 15, ip_net = 16, env_from = 17, helo = 18,
  message_id_shape = 20, url_host = 30, url_domain = 31, attachment_name = 42,
  dkim_domain = 50, attachment_digest = 62,
}
local KIND_OFFSET = { seen = 0, spam = 1000, ham = 2000, complaint_spam = 3000, complaint_ham = 4000 }
-- What a scan reads of each feature value (complaint_ham is only counted):
-- four entries a value, so 16 values fill one 64-entry datagram.
local READ_KINDS = { 'seen', 'spam', 'ham', 'complaint_spam' }
-- Unique counters (type 5000 + the feature whose distinct partners they count).
local UNIQUE_TYPES = { rcpts_per_sender = 5017, senders_per_ip = 5015 }
local WINDOWS = { ['10m'] = 1, ['1h'] = 2, ['24h'] = 3, today = 4, ['7d'] = 5, ['14d'] = 6 }

-- Sensible defaults (docs/counters-plugin.md): mass mailings by subject
-- and link domain, link domains and senders that are almost always spam,
-- senders that are almost always ham, a first message from a sender, a
-- sender writing to many distinct recipients, user complaints.
local DEFAULT_RULES = {
  SHINGLED_MASS_SUBJECT = { feature = 'subject', window = '10m', seen = 50, score = 1.0 },
  SHINGLED_MASS_URL_DOMAIN = { feature = 'url_domain', window = '1h', seen = 500, score = 0.5 },
  SHINGLED_SPAMMY_URL_DOMAIN = { feature = 'url_domain', window = '24h', spam_ratio = 0.95,
                                 min_verdicts = 50, score = 3.0 },
  SHINGLED_SPAMMY_SENDER = { feature = 'from', window = '24h', spam_ratio = 0.95, min_verdicts = 20,
                             score = 2.0 },
  SHINGLED_HAMMY_SENDER = { feature = 'from', window = '7d', ham_ratio = 0.98, min_verdicts = 50,
                            score = -1.0 },
  SHINGLED_NEW_SENDER = { feature = 'from', window = '14d', seen_max = 0, score = 0.1 },
  SHINGLED_FANOUT = { unique = 'rcpts_per_sender', window = '1h', unique_min = 100, score = 1.0 },
  SHINGLED_COMPLAINED_SENDER = { feature = 'from', window = '7d', complaint_spam = 3, score = 2.0 },
}

local MAGIC = 'shct'
local VERSION = 1
local OP_INCREMENT, OP_INCREMENT_READ = 2, 3
local HEADER_SIZE, SUMS_SIZE, MAX_ENTRIES = 16, 48, 64
local CACHE_KEY = 'shingled_counters'
local E = {}

local upstreams
local rules = {}  -- { name, feature | unique, window, test fields, score }

---------------------------------------------------------------- bytes

local function u16le(v) return string.char(v % 256, math.floor(v / 256) % 256) end
local function u32le(v)
  return string.char(v % 256, math.floor(v / 256) % 256, math.floor(v / 65536) % 256,
      math.floor(v / 16777216) % 256)
end
local function u64_at(s, i)  -- exact to 2^53: counts
  local v = 0
  for k = i + 7, i, -1 do v = v * 256 + s:byte(k) end
  return v
end

-- The 64-bit shingle of a value: xxh64, its 8 bytes as the wire's
-- little-endian u64; and that number in hex for logs and shinglectl.
local function shingle_of(value)
  return rspamd_hash.create_specific('xxh64', value):bin()
end
local function shingle_hex(bytes)
  return '0x' .. (bytes:reverse():gsub('.', function(c) return string.format('%02x', c:byte()) end))
end

---------------------------------------------------------------- features

local function lower(s) return s and string.lower(s) or nil end

local function mime_from(task)
  local from = task:get_from('mime')
  return ((from or E)[1] or E)
end

local function domain_of(addr)
  return addr and addr:match('@([^@]+)$')
end

-- "Re: [list] FW:  Cheap  pills 1234!" -> "cheap pills": case, reply
-- prefixes, list tags, digits, ASCII punctuation and spacing do not make a
-- new subject (bytes of other scripts are kept).
local function normalise_subject(s)
  s = string.lower(s)
  local prev
  repeat
    prev = s
    s = s:gsub('^%s*re%s*:%s*', ''):gsub('^%s*fwd?%s*:%s*', ''):gsub('^%s*%[[^%]]*%]%s*', '')
  until s == prev
  s = s:gsub('[%d%p]+', ' '):gsub('%s+', ' '):gsub('^ ', ''):gsub(' $', '')
  return s
end

-- The shape of a Message-ID: runs of digits become 0, of letters a.
local function id_shape(id)
  return (id:gsub('%d+', '0'):gsub('%a+', 'a'))
end

local function ip_network(ip)
  if ip:get_version() == 4 then return tostring(ip:apply_mask(24)) .. '/24' end
  return tostring(ip:apply_mask(64)) .. '/64'
end

-- Each feature: a function(task) returning a list of values (maybe empty).
local FEATURES = {
  from = function(task)
    local a = mime_from(task).addr
    return a and { lower(a) } or {}
  end,
  from_domain = function(task)
    local d = domain_of(mime_from(task).addr)
    return d and { lower(d) } or {}
  end,
  env_from = function(task)
    local f = task:get_from('smtp')
    local a = ((f or E)[1] or E).addr
    return a and { lower(a) } or {}
  end,
  ip = function(task)
    local ip = task:get_from_ip()
    return (ip and ip:is_valid()) and { tostring(ip) } or {}
  end,
  ip_net = function(task)
    local ip = task:get_from_ip()
    return (ip and ip:is_valid()) and { ip_network(ip) } or {}
  end,
  helo = function(task)
    local h = task:get_helo()
    return (h and #h > 0) and { lower(h) } or {}
  end,
  subject = function(task)
    local s = task:get_subject()
    return (s and #s > 0) and { normalise_subject(s) } or {}
  end,
  url_host = function(task)
    local out = {}
    for _, u in ipairs(task:get_urls() or E) do
      local h = u:get_host()
      if h and #h > 0 then table.insert(out, lower(h)) end
    end
    return out
  end,
  url_domain = function(task)
    local out = {}
    for _, u in ipairs(task:get_urls() or E) do
      local t = u:get_tld()
      if t and #t > 0 then table.insert(out, lower(t)) end
    end
    return out
  end,
  attachment_name = function(task)
    local out = {}
    for _, p in ipairs(task:get_parts() or E) do
      local f = p:get_filename()
      if f then table.insert(out, lower(f)) end
    end
    return out
  end,
  attachment_digest = function(task)
    local out = {}
    for _, p in ipairs(task:get_parts() or E) do
      if p:get_filename() then table.insert(out, p:get_digest()) end
    end
    return out
  end,
  dkim_domain = function(task)
    local out = {}
    for _, h in ipairs(task:get_header_full('DKIM-Signature') or E) do
      local d = (h.decoded or h.value or ''):match('[;%s]d%s*=%s*([^;%s]+)') or
          (h.decoded or h.value or ''):match('^d%s*=%s*([^;%s]+)')
      if d then table.insert(out, lower(d)) end
    end
    return out
  end,
  message_id_shape = function(task)
    local id = task:get_message_id()
    return (id and id ~= 'undef' and #id > 0) and { id_shape(id) } or {}
  end,
}

-- The message's (feature, value) pairs, distinct, at most max_values per
-- feature, in the configured order.
local function message_features(task)
  local out = {}
  for _, name in ipairs(settings.features) do
    local seen = {}
    local n = 0
    for _, v in ipairs(FEATURES[name](task)) do
      if not seen[v] and n < settings.max_values then
        seen[v] = true
        n = n + 1
        table.insert(out, { feature = name, type = FEATURE_TYPES[name], value = v, shingle = shingle_of(v) })
      end
    end
  end
  return out
end

-- Unique counters: (unique value, partner values).
local function message_uniques(task)
  local out = {}
  local f = task:get_from('smtp')
  local sender = lower(((f or E)[1] or E).addr or mime_from(task).addr)
  if sender then
    local partners, seen = {}, {}
    for _, r in ipairs(task:get_recipients('smtp') or task:get_recipients('mime') or E) do
      local a = lower(r.addr)
      if a and not seen[a] and #partners < settings.max_rcpts then
        seen[a] = true
        table.insert(partners, a)
      end
    end
    if #partners > 0 then
      table.insert(out, { unique = 'rcpts_per_sender', type = UNIQUE_TYPES.rcpts_per_sender,
                          value = sender, partners = partners })
    end
  end
  local ip = task:get_from_ip()
  if sender and ip and ip:is_valid() then
    table.insert(out, { unique = 'senders_per_ip', type = UNIQUE_TYPES.senders_per_ip,
                        value = tostring(ip), partners = { sender } })
  end
  return out
end

---------------------------------------------------------------- protocol

local function entry(type_, delta, shingle, pair)
  return u16le(type_) .. string.char(pair and 1 or 0, 0) .. u32le(delta) .. shingle .. (pair or '')
end

local function request(op, tag, entries)
  return table.concat({ MAGIC, string.char(VERSION, op), u16le(#entries), tag,
                        string.char(#settings.prefix), settings.prefix, table.concat(entries) })
end

-- The sums of each entry (op 3), or nil and why the reply is unusable.
local function decode_reply(data, tag, op, n)
  data = tostring(data)
  if #data < HEADER_SIZE or data:sub(1, 4) ~= MAGIC then return nil, 'not a counter reply' end
  if data:byte(5) ~= VERSION or data:byte(6) ~= op or data:byte(7) + data:byte(8) * 256 ~= n then
    return nil, 'unexpected header'
  end
  if data:sub(9, 12) ~= tag then return nil, 'reply to another tag' end
  local status = data:byte(13)
  if status == 2 then return nil, 'refused by the server (not allowed to increment)' end
  local want = HEADER_SIZE + (op == OP_INCREMENT_READ and n * SUMS_SIZE or 0)
  if #data ~= want then return nil, 'reply of ' .. #data .. ' bytes, not ' .. want end
  local sums = {}
  if op == OP_INCREMENT_READ then
    for i = 1, n do
      local at = HEADER_SIZE + (i - 1) * SUMS_SIZE + 1
      local s = {}
      for w = 1, 6 do s[w] = u64_at(data, at + (w - 1) * 8) end
      sums[i] = s
    end
  end
  return { store_full = status == 1, sums = sums }
end

-- Sends the entries in requests of at most MAX_ENTRIES; calls on_reply(i,
-- reply) for request i, or logs and skips it (the scan goes on).
local function exchange(task, what, op, entries, on_reply)
  local upstream = upstreams:get_upstream_master_slave()
  if not upstream then
    rspamd_logger.errx(task, '%s: no shingled server available; no counter figures', N)
    return
  end
  local addr = upstream:get_addr()
  local where = string.format('%s:%s', tostring(addr), addr:get_port())
  for first = 1, #entries, MAX_ENTRIES do
    local part = {}
    for i = first, math.min(#entries, first + MAX_ENTRIES - 1) do table.insert(part, entries[i]) end
    local tag = tostring(rspamd_text.randombytes(4))
    local sent, err = rspamd_udp.sendto({
      task = task, host = addr, data = request(op, tag, part),
      timeout = settings.timeout, retransmits = settings.retransmits,
      callback = function(ok, reply)
        if not ok then
          upstream:fail()
          rspamd_logger.errx(task, '%s: %s at %s: %s; no counter figures', N, what, where, reply)
          return
        end
        local res, why = decode_reply(reply, tag, op, #part)
        if not res then
          rspamd_logger.errx(task, '%s: %s at %s: %s; no counter figures', N, what, where, why)
          return
        end
        upstream:ok()
        if res.store_full then
          rspamd_logger.infox(task, '%s: shingled could not create some counters (store full)', N)
        end
        if on_reply then on_reply(first, res) end
      end,
    })
    if not sent then
      rspamd_logger.errx(task, '%s: cannot send to shingled at %s: %s', N, where, err)
    end
  end
end

---------------------------------------------------------------- rules

local function fire(task, rule, option)
  task:insert_result(rule.name, 1.0, option)
end

-- Whether one feature value's figures satisfy a rule.
local function feature_matches(rule, fig)
  local w = WINDOWS[rule.window]
  local seen = fig.seen[w]
  if rule.seen and seen < rule.seen then return false end
  if rule.seen_max and seen > rule.seen_max then return false end
  local spam, ham = fig.spam[w], fig.ham[w]
  if rule.spam_ratio or rule.ham_ratio then
    local verdicts = spam + ham
    if verdicts < (rule.min_verdicts or 1) then return false end
    if rule.spam_ratio and spam / verdicts < rule.spam_ratio then return false end
    if rule.ham_ratio and ham / verdicts < rule.ham_ratio then return false end
  end
  if rule.complaint_spam and fig.complaint_spam[w] < rule.complaint_spam then return false end
  return true
end

local function apply_rules(task, figures, uniques)
  for _, rule in ipairs(rules) do
    if rule.feature then
      for _, fig in ipairs(figures) do
        if fig.feature == rule.feature and feature_matches(rule, fig) then
          fire(task, rule, string.format('%s:%s', fig.feature, fig.value))
          break
        end
      end
    else
      for _, u in ipairs(uniques) do
        local count = u.count and u.count[WINDOWS[rule.window]]
        if u.unique == rule.unique and count and count >= rule.unique_min then
          fire(task, rule, string.format('%s:%s=%d', u.unique, u.value, count))
        end
      end
    end
  end
end

-- The figures for other rules and modules: Lua rules read the task cache,
-- anything else the mempool variables shingled_<feature>_<stat>_<window>
-- (first value of each feature; counts of the message's own features).
local function expose(task, figures, uniques)
  local pool = task:get_mempool()
  local done = {}
  for _, fig in ipairs(figures) do
    if not done[fig.feature] then
      done[fig.feature] = true
      for _, stat in ipairs({ 'seen', 'spam', 'ham' }) do
        pool:set_variable(string.format('shingled_%s_%s_24h', fig.feature, stat), tostring(fig[stat][3]))
      end
    end
  end
  for _, u in ipairs(uniques) do
    if u.count then pool:set_variable('shingled_' .. u.unique .. '_24h', tostring(u.count[3])) end
  end
end

---------------------------------------------------------------- phases

local function counters_check(task)
  if not settings.allow_local and lua_util.is_rspamc_or_controller(task) then return end
  local figures = message_features(task)
  local uniques = message_uniques(task)
  if #figures == 0 and #uniques == 0 then return end
  local entries, slots = {}, {}
  for _, f in ipairs(figures) do
    for _, kind in ipairs(READ_KINDS) do
      table.insert(entries, entry(f.type + KIND_OFFSET[kind], kind == 'seen' and 1 or 0, f.shingle))
      table.insert(slots, { fig = f, kind = kind })
    end
  end
  for _, u in ipairs(uniques) do
    local unique_shingle = shingle_of(u.value)
    for _, partner in ipairs(u.partners) do
      table.insert(entries, entry(u.type, 1, unique_shingle, shingle_of(u.value .. '\0' .. partner)))
      table.insert(slots, { uniq = u })
    end
  end
  local state = { figures = figures, pending = math.ceil(#entries / MAX_ENTRIES) }
  task:cache_set(CACHE_KEY, state)
  if lua_util.debugm then
    for _, f in ipairs(figures) do
      lua_util.debugm(N, task, 'feature %s %s: counter %s:%s (seen)', f.feature, f.value, f.type,
          shingle_hex(f.shingle))
    end
  end
  exchange(task, 'increment-and-read', OP_INCREMENT_READ, entries, function(first, res)
    for i, sums in ipairs(res.sums) do
      local slot = slots[first + i - 1]
      if slot.fig then
        slot.fig[slot.kind] = sums
      elseif not slot.uniq.count or sums[3] > slot.uniq.count[3] then
        slot.uniq.count = sums  -- every pair entry answers the unique counter
      end
    end
    state.pending = state.pending - 1
    if state.pending == 0 then
      local complete = {}
      for _, f in ipairs(figures) do
        if f.seen and f.spam and f.ham and f.complaint_spam then
          table.insert(complete, f)
        end
      end
      state.answered = true
      apply_rules(task, complete, uniques)
      expose(task, complete, uniques)
    end
  end)
end

local function in_list(list, v)
  for _, x in ipairs(list) do if x == v then return true end end
  return false
end

-- One increment of `kind` for every feature value of the message.
local function count_as(task, figures, kind, what)
  local entries = {}
  for _, f in ipairs(figures) do table.insert(entries, entry(f.type + KIND_OFFSET[kind], 1, f.shingle)) end
  if #entries > 0 then exchange(task, what, OP_INCREMENT, entries) end
end

-- After the verdict: spam or ham by the action (configurable); messages
-- with neither (greylisted, soft-rejected) are not counted.
local function counters_verdict(task)
  local state = task:cache_get(CACHE_KEY)
  if not state or not state.answered or task:has_flag('skip') then return end
  local action = task:get_metric_action()
  local kind = in_list(settings.spam_actions, action) and 'spam' or
      (in_list(settings.ham_actions, action) and 'ham' or nil)
  if kind then count_as(task, state.figures, kind, 'verdict') end
end

-- A classifier's learn_condition calls this (docs/counters-plugin.md):
-- `rspamc learn_spam` / `learn_ham` are user complaints. Returns true: it
-- never stops the classifier's own learning.
local function counters_learn(task, is_spam, is_unlearn)
  if is_unlearn then return true end
  count_as(task, message_features(task), is_spam and 'complaint_spam' or 'complaint_ham', 'complaint')
  return true
end

---------------------------------------------------------------- configuration

local opts = rspamd_config:get_all_opt(N)
if not opts then return end
settings = lua_util.override_defaults(settings, opts)
-- Lists replace the defaults whole (override_defaults merges them by index).
for _, k in ipairs({ 'features', 'spam_actions', 'ham_actions' }) do
  if type(opts[k]) == 'table' then settings[k] = opts[k] end
end
if type(settings.timeout) == 'string' then settings.timeout = lua_util.parse_time_interval(settings.timeout) end
settings.retransmits = tonumber(settings.retransmits) or 0
local function bad(what, ...)
  rspamd_logger.errx(rspamd_config, '%s: ' .. what .. '; disabling the module', N, ...)
  lua_util.disable_module(N, 'config')
end
if type(settings.timeout) ~= 'number' or settings.timeout <= 0 then return bad('bad timeout %s', opts.timeout) end
if type(settings.prefix) ~= 'string' or #settings.prefix < 1 or #settings.prefix > 64 then
  return bad('prefix must be 1..64 bytes, not %s', settings.prefix)
end
for _, f in ipairs(settings.features) do
  if not FEATURES[f] then return bad('unknown feature %s', f) end
end
for name, r in pairs(settings.rules or DEFAULT_RULES) do
  local rule = lua_util.shallowcopy(r)
  rule.name = (settings.rules and '' or settings.symbol_prefix) .. name
  rule.score = tonumber(rule.score) or 0
  if not WINDOWS[rule.window or ''] then return bad('rule %s: window must be one of 10m 1h 24h today 7d 14d', name) end
  if rule.feature and not FEATURE_TYPES[rule.feature] then return bad('rule %s: unknown feature %s', name, rule.feature) end
  if rule.unique and not UNIQUE_TYPES[rule.unique] then return bad('rule %s: unknown unique counter %s', name, rule.unique) end
  if not rule.feature == not rule.unique then return bad('rule %s: needs feature or unique', name) end
  if rule.unique and not tonumber(rule.unique_min) then return bad('rule %s: needs unique_min', name) end
  table.insert(rules, rule)
end
table.sort(rules, function(a, b) return a.name < b.name end)

upstreams = rspamd_upstream_list.create(rspamd_config, settings.servers, 11337)
if not upstreams then return bad('cannot parse servers %s', settings.servers) end

local augmentation = string.format('timeout=%f', settings.timeout * (settings.retransmits + 1))
local id = rspamd_config:register_symbol({
  name = 'SHINGLED_COUNTERS_CHECK',
  type = 'callback',
  -- fine: still run when other rules have already reached the reject score
  -- (rspamd skips the rest otherwise), or the clearest spam would never be
  -- counted as seen nor, later, as spam
  flags = 'empty,nostat,fine',
  callback = counters_check,
  augmentations = { augmentation },
})
for _, rule in ipairs(rules) do
  rspamd_config:register_symbol({ name = rule.name, type = 'virtual', parent = id, score = rule.score,
                                  group = 'shingled_counters' })
end
rspamd_config:register_symbol({
  name = 'SHINGLED_COUNTERS_VERDICT',
  type = 'idempotent',
  flags = 'explicit_disable,ignore_passthrough',
  callback = counters_verdict,
  augmentations = { augmentation },
})
rspamd_plugins[N] = { learn = counters_learn }
local names = {}
for _, r in ipairs(rules) do table.insert(names, r.name) end
rspamd_logger.infox(rspamd_config, '%s: shingled at %s, prefix %s, %s features, rules %s', N,
    settings.servers, settings.prefix, #settings.features, table.concat(names, ', '))
