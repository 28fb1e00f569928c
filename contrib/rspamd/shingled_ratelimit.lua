--[[
shingled_ratelimit: rspamd's rate limits decided by shingled over UDP
instead of by Redis scripts. Two ways to hold the rules (`rules`):

* "rspamd" (default): the rules stay where the admin has them, in rspamd's
  own `ratelimit` section (local.d/ratelimit.conf): every keyword family,
  selectors, custom keywords, per-bucket options, whitelists and maps. The
  plugin forms the buckets as rspamd's module does, names them as rspamd
  names its Redis keys (RL + base32 of the key string's hash), and sends
  them with the message (protocol kind 3); shingled runs current rspamd's
  bucket arithmetic and answers which buckets refused. shingled holds no
  copy of the rules.
* "shingled": the plugin sends only the envelope (kind 1) and shingled
  forms the buckets from its own `ratelimit { rates { } }` (six families).

The wire protocol is docs/ratelimit.md; install steps and options are
contrib/rspamd/README.md. Never blocks a message because shingled is
unreachable or answers nonsense: like rspamd's module with Redis down, it
logs and lets the mail pass. Works on rspamd 3.4 (LuaJIT, no string.pack:
bytes are built by hand) and on current rspamd.
]]--

if confighelp then
  return
end

local N = 'shingled_ratelimit'
local rspamd_logger = require "rspamd_logger"
local rspamd_udp = require "rspamd_udp"
local rspamd_text = require "rspamd_text"
local rspamd_upstream_list = require "rspamd_upstream_list"
local rspamd_hash = require "rspamd_cryptobox_hash"
local lua_util = require "lua_util"
local lua_verdict = require "lua_verdict"
local lua_maps = require "lua_maps"
local lua_selectors = require "lua_selectors"

local settings = {
  servers = '127.0.0.1:11336',
  timeout = 1.0,          -- seconds per attempt
  retransmits = 2,        -- extra sends of the identical datagram on timeout
  flow = 'two_phase',     -- or 'one_shot'
  rules = 'rspamd',       -- or 'shingled'
  -- rules = "shingled" only (with "rspamd", these come from rspamd's section):
  symbol = nil,           -- symbol-only mode: insert it, never soft reject
  info_symbol = nil,      -- insert it and soft reject
  symbol_weight = 'fixed', -- 'fixed' (1.0, rspamd >= 2.0) or 'tanh' (the reply's score)
  message = nil,          -- soft reject text instead of 'Ratelimit "<family>" exceeded'
  allow_local = false,    -- also limit requests from rspamc / the controller
}

-- rspamd's `ratelimit` section, as its module reads it (rules = "rspamd").
local rl = {
  prefix = 'RL',
  expire = 172800,
  bounce_senders = { 'postmaster', 'mailer-daemon', '', 'null', 'fetchmail-daemon', 'mdaemon' },
  whitelisted_rcpts = nil,  -- maps
  whitelisted_ip = nil,
  whitelisted_user = nil,
  symbol = nil,
  info_symbol = nil,
  allow_local = false,
  prefilter = true,
  dynamic_rate_limit = false,
  ham_factor_rate = 1.01, spam_factor_rate = 0.99,
  ham_factor_burst = 1.02, spam_factor_burst = 0.98,
  max_rate_mult = 5, max_bucket_mult = 10,
  limits = {},          -- { name = ..., selector = ..., buckets = { ... } }, sorted by name
  custom_keywords = {}, -- name -> function(task) returning key, limit
  message_func = nil,
}

-- Protocol constants (docs/ratelimit.md, include/shingled/ratelimit_wire.h).
local MAGIC = 'shrl'
local VERSION, KIND_MESSAGE, KIND_KEYED = 1, 1, 3
local PHASE_ONE_SHOT, PHASE_CHECK, PHASE_UPDATE, PHASE_RELEASE = 1, 2, 3, 4
local OUTCOME_UNCERTAIN, OUTCOME_HAM, OUTCOME_SPAM = 0, 1, 2
local VERDICT_ACCEPT, VERDICT_LIMIT, VERDICT_WHITELISTED = 0, 1, 2
local HEADER_SIZE, RESULT_SIZE, KEYED_RESULT_SIZE = 16, 32, 40
local KEYED_FIXED, SPEC_FIXED, FACTORS_SIZE = 24, 24, 48
local SPEC_DYNAMIC, SPEC_OWN_FACTORS = 1, 2
local MAX_SPECS = 64
local MAX_LISTED_RCPTS, MAX_STRING, MAX_REQUEST = 32, 255, 2048
local ZERO_MASK = string.rep('\0', 8)
local FAMILIES = { 'to', 'to_ip', 'to_ip_from', 'bounce_to', 'bounce_to_ip', 'user' }
local NO_RECIPIENT = 255
local PHASE_NAMES = { 'one-shot', 'check', 'update', 'release' }
local CACHE_KEY = 'shingled_ratelimit'
local E = {}

local upstreams

---------------------------------------------------------------- encoding

local function u16le(v)
  return string.char(v % 256, math.floor(v / 256) % 256)
end

local function u32le(v)
  return string.char(v % 256, math.floor(v / 256) % 256, math.floor(v / 65536) % 256,
      math.floor(v / 16777216) % 256)
end

local function u32_at(s, i)  -- i is 1-based
  local b1, b2, b3, b4 = s:byte(i, i + 3)
  return ((b4 * 256 + b3) * 256 + b2) * 256 + b1
end

-- IEEE 754 binary64, little-endian, of a finite number (rspamd 3.4's
-- LuaJIT has no string.pack). Exact: the mantissa is taken 2^52 at a time.
local function f64le(x)
  if x == 0 then return string.rep('\0', 8) end
  local sign = 0
  if x < 0 then sign, x = 128, -x end
  local m, e = math.frexp(x)  -- x = m * 2^e, 0.5 <= m < 1
  local exp = e + 1022
  local mant
  if exp <= 0 then  -- subnormal
    mant = x / 2 ^ -1074
    exp = 0
  else
    mant = (m * 2 - 1) * 2 ^ 52
  end
  local bytes = {}
  for i = 1, 6 do
    bytes[i] = mant % 256
    mant = math.floor(mant / 256)
  end
  bytes[7] = (exp % 16) * 16 + mant % 16
  bytes[8] = sign + math.floor(exp / 16)
  return string.char(lua_util.unpack(bytes))
end

-- IEEE 754 binary32, little-endian, at 1-based position i.
local function f32_at(s, i)
  local b1, b2, b3, b4 = s:byte(i, i + 3)
  local sign = b4 >= 128 and -1 or 1
  local exp = (b4 % 128) * 2 + math.floor(b3 / 128)
  local mant = ((b3 % 128) * 256 + b2) * 256 + b1
  if exp == 255 then
    return mant == 0 and sign * math.huge or 0 / 0
  elseif exp == 0 then
    return sign * mant * 2 ^ -149
  end
  return sign * (1 + mant / 2 ^ 23) * 2 ^ (exp - 127)
end

-- The bits of an 8-byte mask, as a set of 0-based indexes.
local function mask_bits(mask)
  local bits = {}
  for byte_i = 1, 8 do
    local b = mask:byte(byte_i)
    for bit = 0, 7 do
      if b % 2 == 1 then bits[(byte_i - 1) * 8 + bit] = true end
      b = math.floor(b / 2)
    end
  end
  return bits
end

local function lstring(s)
  return string.char(#s) .. s
end

-- The common header of a reply, or nil and why it is unusable.
local function check_header(data, id, kind, result_size)
  if #data < HEADER_SIZE then return nil, 'short reply (' .. #data .. ' bytes)' end
  if data:sub(1, 4) ~= MAGIC then return nil, 'bad magic' end
  local version, rkind, n, status = data:byte(5, 8)
  if version ~= VERSION or rkind ~= kind or n ~= 1 then
    return nil, string.format('unexpected header (version %d, kind %d, n %d)', version, rkind, n)
  end
  if data:sub(9, 16) ~= id then return nil, 'reply to another request id' end
  if status == 1 then return nil, 'refused by the server (not allowed to update)' end
  if status ~= 0 then return nil, 'unknown status ' .. status end
  if #data ~= HEADER_SIZE + result_size then return nil, 'reply of ' .. #data .. ' bytes' end
  return true
end

-- The fields both message results share (1-based offset r of the result).
local function decode_result(data, r)
  local verdict, flags, family, index = data:byte(r, r + 3)
  return {
    verdict = verdict,
    store_full = flags % 2 == 1,
    family = FAMILIES[family] or 'unknown',
    index = index,
    wait_ms = u32_at(data, r + 4),
    mask = data:sub(r + 8, r + 15),  -- kept as bytes: echoed, never computed on
    level = f32_at(data, r + 16),
    capacity = f32_at(data, r + 20),
    score = f32_at(data, r + 24),
    nbuckets = data:byte(r + 28),
  }
end

---------------------------------------------------------------- exchange

-- Sends one request (`data`, carrying `id`) and calls on_reply(reply bytes)
-- or nothing on a failure (logged: the mail passes).
local function exchange(task, upstream, what, id, data, decode, on_reply)
  local addr = upstream:get_addr()
  local where = string.format('%s:%s', tostring(addr), addr:get_port())
  local function callback(ok, reply)
    if not ok then
      upstream:fail()
      rspamd_logger.errx(task, 'shingled %s at %s: %s; letting the message pass', what, where, reply)
      return
    end
    local res, err = decode(tostring(reply), id)
    if not res then
      rspamd_logger.errx(task, 'shingled %s at %s: %s; letting the message pass', what, where, err)
      return
    end
    upstream:ok()
    if on_reply then on_reply(res) end
  end
  local sent, err = rspamd_udp.sendto({
    task = task, host = addr, data = data,
    timeout = settings.timeout, retransmits = settings.retransmits, callback = callback,
  })
  if not sent then
    rspamd_logger.errx(task, 'cannot send to shingled at %s: %s; letting the message pass', where, err)
  end
end

local function new_id()
  return tostring(rspamd_text.randombytes(8))
end

local function verdict_outcome(task)
  local verdict = lua_verdict.get_specific_verdict('ratelimit', task)
  if verdict == 'spam' or verdict == 'junk' then return OUTCOME_SPAM end
  if verdict == 'ham' then return OUTCOME_HAM end
  return OUTCOME_UNCERTAIN
end

---------------------------------------------------------------- rules = "rspamd": parsing the section

-- `count[k|m|g] / period[s|m|h|d]`, as rspamd 3.4 reads it (spec §3.3):
-- spaces only around the slash, the first unusable character ends the
-- string. Returns the period in seconds and the count, or nil.
local function parse_rate_string(s)
  if type(s) ~= 'string' then return nil end
  local function number(i)
    local j = i
    local c = s:sub(j, j)
    if c == '+' or c == '-' then j = j + 1 end
    local digits = s:match('^%d+', j)
    if digits then
      j = j + #digits
      local frac = s:match('^%.%d+', j)
      if frac then j = j + #frac end
    else
      local frac = j > i and s:match('^%.%d+', j)
      if not frac then return nil end
      j = j + #frac
    end
    return tonumber(s:sub(i, j - 1)), j
  end
  local count, i = number(1)
  if not count then return nil end
  local mult = ({ k = 1e3, m = 1e6, g = 1e9 })[s:sub(i, i)]
  if mult then count, i = count * mult, i + 1 end
  i = (s:find('[^ ]', i)) or #s + 1
  if s:sub(i, i) ~= '/' then return nil end
  i = (s:find('[^ ]', i + 1)) or #s + 1
  local period
  period, i = number(i)
  if not period then return nil end
  local unit = ({ s = 1, m = 60, h = 3600, d = 86400 })[s:sub(i, i)]
  if unit then period = period * unit end
  if period == 0 then return nil end
  return period, count
end

local BUCKET_FIELDS_34 = { burst = true, rate = true, skip_recipients = true, symbol = true,
                           message = true, skip_soft_reject = true }

-- One bucket in any form of spec §3.2, as rspamd 3.4 reads it, or nil
-- (logged). Current rspamd's own parser is used instead when installed.
local function parse_limit_34(name, data)
  if type(data) == 'table' then
    if #data == 2 and tonumber(data[1]) and tonumber(data[2]) then
      local burst, rate = tonumber(data[1]), tonumber(data[2])
      if burst > 0 and rate > 0 then return { burst = burst, rate = rate } end
      if burst == 0 then
        rspamd_logger.infox(rspamd_config, '%s: limit %s disabled: burst is zero', N, name)
      else
        rspamd_logger.warnx(rspamd_config, '%s: invalid numbers for %s', N, name)
      end
      return nil
    end
    local b = {}
    for k, v in pairs(data) do
      if not BUCKET_FIELDS_34[k] then
        rspamd_logger.errx(rspamd_config, '%s: bucket of %s: extra field %s', N, name, k)
        return nil
      end
      b[k] = v
    end
    if type(b.burst) == 'string' then b.burst = lua_util.dehumanize_number(b.burst) end
    if type(b.rate) == 'string' then
      local period, count = parse_rate_string(b.rate)
      b.rate = period and count / period
    end
    if type(b.burst) ~= 'number' or type(b.rate) ~= 'number' then
      rspamd_logger.errx(rspamd_config, '%s: bucket of %s: burst and rate must be numbers', N, name)
      return nil
    end
    return b
  elseif type(data) == 'string' then
    local period, count = parse_rate_string(data)
    if period then return { burst = count, rate = count / period } end
    rspamd_logger.errx(rspamd_config, '%s: bad limit for %s: %s', N, name, data)
  end
  return nil
end

local parse_limit = parse_limit_34
do
  local ok, common = pcall(require, 'plugins/ratelimit')
  if ok and type(common) == 'table' and type(common.parse_limit) == 'function' then
    parse_limit = common.parse_limit  -- the installed rspamd's own reading
  end
end

-- A bucket shingled can hold (its decoder refuses the rest).
local function usable_bucket(name, b)
  if not (type(b.burst) == 'number' and b.burst > 0 and b.burst <= 1e12 and
      type(b.rate) == 'number' and b.rate >= 0 and b.rate <= 1e12) then
    rspamd_logger.errx(rspamd_config, '%s: bucket of %s: burst %s and rate %s are out of range '..
        '(burst in (0, 1e12], rate in [0, 1e12]); rule dropped', N, name, b.burst, b.rate)
    return false
  end
  return true
end

-- The keywords a rule's name is made of (spec §3.4): each gives its value
-- for the message, or nil when absent (the rule then does not apply).
local function from_address(task)
  local from = task:get_from(0)
  return ((from or E)[1] or E)
end

local KEYWORDS = {
  ip = function(task)
    local ip = task:get_from_ip()
    if ip and ip:is_valid() then return tostring(ip) end
  end,
  rip = function(task)
    local ip = task:get_from_ip()
    if ip and ip:is_valid() and not ip:is_local() then return tostring(ip) end
  end,
  from = function(task)
    local addr = from_address(task).addr
    if addr then return string.lower(addr) end
  end,
  bounce = function(task)
    local user = from_address(task).user
    if not user then return '_' end
    for _, b in ipairs(rl.bounce_senders) do
      if b == user then return '_' end
    end
  end,
  asn = function(task) return task:get_mempool():get_variable('asn') end,
  user = function(task) return task:get_user() end,
  to = function(task) return task:get_principal_recipient() end,
  digest = function(task) return task:get_digest() end,
  attachments = function(task)
    local digests = {}
    for _, p in ipairs(task:get_parts() or E) do
      if p:get_filename() then table.insert(digests, p:get_digest()) end
    end
    if #digests > 0 then return table.concat(digests, '') end
  end,
  files = function(task)
    local files = {}
    for _, p in ipairs(task:get_parts() or E) do
      local f = p:get_filename()
      if f then table.insert(files, f) end
    end
    if #files > 0 then return table.concat(files, ':') end
  end,
}

local function read_rules(rates)
  local limits = {}
  for name, lim in pairs(rates or E) do
    -- `{ bucket = B }` or `{ bucket = [B, ...] }` (B a table or a rate
    -- string), else the old forms: `[burst, rate]` or a rate string.
    local list = { lim }
    if type(lim) == 'table' and lim.bucket ~= nil then
      list = (type(lim.bucket) == 'table' and lim.bucket[1] ~= nil) and lim.bucket or { lim.bucket }
    end
    local buckets = {}
    local ok = true
    for _, data in ipairs(list) do  -- one bad bucket drops the rule, as in rspamd
      local b = parse_limit(name, data)
      if not b or not usable_bucket(name, b) then ok = false; break end
      table.insert(buckets, b)
    end
    local rule = { name = name, buckets = buckets }
    if ok and type(lim) == 'table' and lim.selector then
      rule.selector = lua_selectors.parse_selector(rspamd_config, lim.selector)
      if not rule.selector then
        rspamd_logger.errx(rspamd_config, '%s: bad selector for %s: "%s"; rule dropped', N, name,
            lim.selector)
        ok = false
      end
    elseif ok then
      for _, word in ipairs(lua_util.str_split(name, '_')) do
        if not KEYWORDS[word] then
          rspamd_logger.warnx(rspamd_config, '%s: rule %s: "%s" is not a keyword; the rule ' ..
              'applies to no message (as in rspamd)', N, name, word)
        end
      end
    end
    if ok and #buckets > 0 then table.insert(limits, rule) end
  end
  table.sort(limits, function(a, b) return a.name < b.name end)
  return limits
end

---------------------------------------------------------------- rules = "rspamd": buckets of a message

-- R of a key: round(100000 / burst), as rspamd prints it.
local function burst_tag(bucket)
  return tostring(lua_util.round(100000.0 / bucket.burst))
end

-- The key strings of one rule's bucket for this message (spec §3.5):
-- `R:v1:v2...` from the name's keywords, or the selector's values after
-- `R:rate:` (current rspamd's form, so two buckets of a rule never share
-- a key); {} when a keyword is absent.
local function rule_keys(task, rule, bucket)
  if rule.selector then
    local values = lua_selectors.process_selectors(task, rule.selector)
    if not values then return {} end
    local combined = lua_selectors.combine_selectors(task, values, ':')
    local tag = string.format('%s:%s', burst_tag(bucket), bucket.rate)
    if type(combined) == 'string' then return { tag .. ':' .. combined } end
    local keys = {}
    for _, v in ipairs(combined or E) do table.insert(keys, tag .. ':' .. v) end
    return keys
  end
  local parts = { burst_tag(bucket) }
  for _, word in ipairs(lua_util.str_split(rule.name, '_')) do
    local get = KEYWORDS[word]
    local v = get and get(task)
    if v == nil then return {} end
    table.insert(parts, tostring(v))
  end
  return { table.concat(parts, ':') }
end

-- rspamd's Redis name of a key string: prefix, then the first min(24,
-- length) characters of the base32 text of its BLAKE2b hash.
local function hashed_name(key)
  return rl.prefix .. string.sub(rspamd_hash.create(key):base32(), 1, math.min(24, #key))
end

-- Every bucket of the message, in a stable order (rules by name, buckets
-- in order, then custom keywords), one per key string (the last wins, as
-- in rspamd's table of prefixes).
local function message_buckets(task)
  local list, by_key = {}, {}
  local function add(key, name, bucket)
    local entry = { key = key, name = name, bucket = bucket, hash = hashed_name(key) }
    if by_key[key] then
      list[by_key[key]] = entry
    else
      table.insert(list, entry)
      by_key[key] = #list
    end
  end
  for _, rule in ipairs(rl.limits) do
    for _, bucket in ipairs(rule.buckets) do
      for _, key in ipairs(rule_keys(task, rule, bucket)) do add(key, rule.name, bucket) end
    end
  end
  local names = {}
  for name in pairs(rl.custom_keywords) do table.insert(names, name) end
  table.sort(names)
  for _, name in ipairs(names) do
    local ok, key, limit = pcall(rl.custom_keywords[name], task)
    if not ok then
      rspamd_logger.errx(task, '%s: custom keyword %s failed: %s', N, name, key)
    elseif key then
      local bucket = parse_limit(name, limit)
      if bucket and usable_bucket(name, bucket) then add(tostring(key), name, bucket) end
    end
  end
  return list
end

local function whitelisted(task)
  local ip = task:get_from_ip()
  if rl.whitelisted_ip and ip and ip:is_valid() and rl.whitelisted_ip:get_key(ip) then
    return 'IP'
  end
  if rl.whitelisted_rcpts then
    for _, r in ipairs(task:get_recipients() or E) do
      if (r.user and rl.whitelisted_rcpts:get_key(r.user)) or
          (r.addr and rl.whitelisted_rcpts:get_key(r.addr)) then
        return 'recipient'
      end
    end
  end
  local user = task:get_user()
  if rl.whitelisted_user and user and rl.whitelisted_user:get_key(user) then return 'user' end
end

---------------------------------------------------------------- rules = "rspamd": the protocol (kind 3)

local FACTOR_NAMES = { 'ham_factor_rate', 'spam_factor_rate', 'ham_factor_burst',
                       'spam_factor_burst', 'max_rate_mult', 'max_bucket_mult' }

-- One bucket spec (docs/ratelimit.md, kind 3).
local function encode_spec(entry, cost)
  local b = entry.bucket
  local own = false
  for i = 1, 4 do if b[FACTOR_NAMES[i]] ~= nil then own = true end end
  own = own or b.max_rate_mult ~= nil or b.max_bucket_mult ~= nil
  local dynamic = rl.dynamic_rate_limit or own
  local flags = (dynamic and SPEC_DYNAMIC or 0) + (own and SPEC_OWN_FACTORS or 0)
  local key = entry.hash
  local parts = { string.char(#key, flags), u16le(cost), u32le(rl.expire),
                  f64le(b.burst), f64le(b.rate), key }
  if own then
    for _, f in ipairs(FACTOR_NAMES) do table.insert(parts, f64le(b[f] or rl[f])) end
  end
  return table.concat(parts)
end

-- The requests of a message: its specs in datagrams of at most
-- MAX_REQUEST bytes and MAX_SPECS buckets, each one message (kind 3).
local function pack_chunks(entries, nrcpt)
  local chunks, current, size = {}, nil, 0
  for i, entry in ipairs(entries) do
    local cost = entry.bucket.skip_recipients and 1 or nrcpt
    local spec = encode_spec(entry, math.min(cost, 65535))
    if not current or size + #spec > MAX_REQUEST or #current.specs == MAX_SPECS then
      current = { specs = {}, entries = {}, mask = ZERO_MASK }
      table.insert(chunks, current)
      size = HEADER_SIZE + KEYED_FIXED
    end
    table.insert(current.specs, spec)
    table.insert(current.entries, i)
    size = size + #spec
  end
  return chunks
end

local function encode_keyed(id, phase, outcome, mask, chunk)
  return table.concat({
    MAGIC, string.char(VERSION, KIND_KEYED, 1, 0), id,
    string.char(phase, outcome, #chunk.specs, 0, 0, 0, 0, 0), mask, string.rep('\0', 8),
    table.concat(chunk.specs),
  })
end

local function decode_keyed_reply(data, id)
  local ok, err = check_header(data, id, KIND_KEYED, KEYED_RESULT_SIZE)
  if not ok then return nil, err end
  local res = decode_result(data, HEADER_SIZE + 1)
  res.limited = mask_bits(data:sub(HEADER_SIZE + 33, HEADER_SIZE + 40))
  return res
end

-- What rspamd's module does with each bucket over its limit (spec §3.13,
-- rspamd 3.8 and later): the bucket's symbol, else the module's symbol or
-- info_symbol, with option `rule(redis name)`; a log line; and a soft
-- reject unless a symbol-only setting or skip_soft_reject says not to.
local function act_on_limited_bucket(task, entry, res, deciding)
  local b = entry.bucket
  local option = string.format('%s(%s)', entry.name, entry.hash)
  local sym = b.symbol or rl.symbol or rl.info_symbol
  if sym then task:insert_result(sym, 1.0, option) end
  rspamd_logger.infox(task, 'ratelimit "%s(%s)" exceeded, (%s / %s) (shingled%s); key: %s',
      entry.name, entry.key, b.burst, b.rate, deciding and string.format(
          ': level %.4f of %.4f, %s', res.level, res.capacity, res.wait_ms == 4294967295 and
              'never accepted by leaking alone' or ('accepts again in ' .. res.wait_ms .. ' ms')) or '',
      entry.hash)
  if not (b.symbol or rl.symbol) and not b.skip_soft_reject then
    local text = b.message
    if not text and rl.message_func then
      local ok, t = pcall(rl.message_func, task, entry.name, entry.key, b, entry.hash)
      text = ok and t or nil
    end
    task:set_pre_result('soft reject', text or string.format('Ratelimit "%s" exceeded', entry.name), N)
  end
end

local function rules_check(task)
  if not rl.allow_local and lua_util.is_rspamc_or_controller(task) then return end
  local why = whitelisted(task)
  if why then
    lua_util.debugm(N, task, 'not limited: whitelisted %s', why)
    return
  end
  local entries = message_buckets(task)
  if #entries == 0 or task:has_pre_result() then return end
  local upstream = upstreams:get_upstream_master_slave()
  if not upstream then
    rspamd_logger.errx(task, 'no shingled server available; letting the message pass')
    return
  end
  local _, nrcpt = task:has_recipients('smtp')
  if not nrcpt or nrcpt <= 0 then nrcpt = 1 end
  local state = { entries = entries, chunks = pack_chunks(entries, nrcpt), upstream = upstream }
  task:cache_set(CACHE_KEY, state)
  local phase = settings.flow == 'one_shot' and PHASE_ONE_SHOT or PHASE_CHECK
  for _, chunk in ipairs(state.chunks) do
    local id = new_id()
    exchange(task, upstream, PHASE_NAMES[phase], id, encode_keyed(id, phase, OUTCOME_UNCERTAIN,
        ZERO_MASK, chunk), decode_keyed_reply, function(res)
      state.answered = true
      chunk.mask = res.mask
      if res.store_full then
        rspamd_logger.infox(task, 'shingled: a bucket could not be stored (store full); not limited by it')
      end
      for i, entry_index in ipairs(chunk.entries) do
        if res.limited[i - 1] then
          act_on_limited_bucket(task, entries[entry_index], res, res.index == i - 1)
        end
      end
    end)
  end
end

local function rules_update(task)
  local state = task:cache_get(CACHE_KEY)
  if not state or not state.answered then return end
  local release = task:has_flag('skip') or task:has_pre_result()
  local outcome = release and OUTCOME_UNCERTAIN or verdict_outcome(task)
  for _, chunk in ipairs(state.chunks) do
    if not release or chunk.mask ~= ZERO_MASK then
      local phase = release and PHASE_RELEASE or PHASE_UPDATE
      local id = new_id()
      exchange(task, state.upstream, PHASE_NAMES[phase], id,
          encode_keyed(id, phase, outcome, chunk.mask, chunk), decode_keyed_reply)
    end
  end
end

local function read_rspamd_section()
  local opts = rspamd_config:get_all_opt('ratelimit') or {}
  if opts.limit then
    rspamd_logger.errx(rspamd_config, '%s: ratelimit "limit" is rspamd\'s legacy format, ' ..
        'not supported (nor by rspamd); use rates', N)
  end
  for _, k in ipairs({ 'prefix', 'symbol', 'info_symbol', 'allow_local', 'prefilter',
                       'dynamic_rate_limit', 'ham_factor_rate', 'spam_factor_rate',
                       'ham_factor_burst', 'spam_factor_burst', 'max_rate_mult',
                       'max_bucket_mult', 'bounce_senders' }) do
    if opts[k] ~= nil then rl[k] = opts[k] end
  end
  if opts.expire ~= nil then
    local e = tonumber(opts.expire)
    if not e or e < 1 or e > 366 * 86400 then
      rspamd_logger.errx(rspamd_config, '%s: ratelimit expire %s is not 1..31622400 seconds; ' ..
          'using 172800', N, opts.expire)
    else
      rl.expire = math.floor(e)
    end
  end
  rl.limits = read_rules(opts.rates)
  -- whitelisted_rcpts: a string with commas is a static list; any other
  -- string is a map location; a list is a static set (rspamd's reading).
  local add_map = lua_maps.map_add_from_ucl or lua_maps.rspamd_map_add_from_ucl
  local wrcpts = opts.whitelisted_rcpts or { 'postmaster', 'mailer-daemon' }
  if type(wrcpts) == 'string' and wrcpts:find(',') then
    wrcpts = lua_util.str_split(wrcpts, ',')
  end
  rl.whitelisted_rcpts = add_map(wrcpts, 'set', 'shingled_ratelimit: whitelisted recipients')
  if opts.whitelisted_ip then
    rl.whitelisted_ip = add_map(opts.whitelisted_ip, 'radix', 'shingled_ratelimit: whitelisted IPs')
  end
  if opts.whitelisted_user then
    rl.whitelisted_user = add_map(opts.whitelisted_user, 'set', 'shingled_ratelimit: whitelisted users')
  end
  if opts.custom_keywords then
    local chunk, err = loadfile(opts.custom_keywords)
    local ok, res = false, err
    if chunk then ok, res = pcall(chunk) end
    if not ok then
      rspamd_logger.errx(rspamd_config, '%s: cannot load custom_keywords %s: %s', N,
          opts.custom_keywords, res)
    elseif type(res) == 'table' then
      for k, f in pairs(res) do rl.custom_keywords[k] = f end
    elseif type(res) == 'function' then
      rl.custom_keywords.custom = res
    end
  end
  if opts.message_func then
    local ok, f = pcall(function() return assert(load(opts.message_func))() end)
    if ok and type(f) == 'function' then
      rl.message_func = f
    else
      rspamd_logger.errx(rspamd_config, '%s: bad message_func: %s', N, f)
    end
  end
end

---------------------------------------------------------------- rules = "shingled": the envelope (kind 1)

-- The envelope of a task, as the protocol wants it. Built once per task
-- (kept in the task cache) so that check and update describe the same
-- message and the reservation mask's bit order stays valid.
local function task_envelope(task)
  local env = { ip_family = 0, ip = string.rep('\0', 16), has_sender = false,
                sender = '', user = '', rcpts = {}, rcpt_count = 1 }

  local ip = task:get_from_ip()
  if ip and ip:is_valid() then
    local octets = ip:to_table()
    env.ip_family = ip:get_version()
    env.ip = string.char(lua_util.unpack(octets)) .. string.rep('\0', 16 - #octets)
  end

  -- The sender rspamd's own `from`/`bounce` keywords see: SMTP MAIL FROM,
  -- else MIME From; `<>` is a sender with an empty address.
  local addr = from_address(task).addr
  if addr then
    if #addr <= MAX_STRING then
      env.has_sender, env.sender = true, addr
    else
      rspamd_logger.infox(task, 'sender longer than %s bytes, sent as none', MAX_STRING)
    end
  end

  local user = task:get_user()
  if user and #user > 0 and #user <= MAX_STRING then
    env.user = user
  end

  -- Recipients as received (case kept: shingled's whitelist is
  -- case-sensitive like rspamd's), the principal one first.
  local rcpts = {}
  for _, r in ipairs(task:get_recipients(0) or {}) do
    if r.addr and #r.addr > 0 and #r.addr <= MAX_STRING then
      table.insert(rcpts, r.addr)
    end
  end
  local principal = task:get_principal_recipient()
  if principal and #principal > 0 and #principal <= MAX_STRING then
    -- rspamd lower-cases the principal recipient; send the raw address
    -- it came from when it is one of the recipients.
    local found
    for i, a in ipairs(rcpts) do
      if a:lower() == principal:lower() then found = i; break end
    end
    if found then
      table.insert(rcpts, 1, table.remove(rcpts, found))
    else
      table.insert(rcpts, 1, principal)  -- Deliver-To
    end
  end

  -- rcpt_count is rspamd's weight, the SMTP recipients (at least 1), and
  -- the protocol lists no more than that: a Deliver-To that is not an SMTP
  -- recipient takes the last place, as it replaces the principal one. The
  -- datagram holds at most 32, within MAX_REQUEST bytes in all.
  local _, nsmtp = task:has_recipients('smtp')
  env.rcpt_count = math.min(65535, math.max(nsmtp or 0, 1))
  local room = MAX_REQUEST - HEADER_SIZE - 32 - (1 + #env.sender) - (1 + #env.user)
  for _, a in ipairs(rcpts) do
    if #env.rcpts >= math.min(MAX_LISTED_RCPTS, env.rcpt_count) or room < 1 + #a then break end
    table.insert(env.rcpts, a)
    room = room - 1 - #a
  end
  return env
end

local function encode_envelope(id, phase, outcome, mask, env)
  local parts = {
    MAGIC, string.char(VERSION, KIND_MESSAGE, 1, 0), id,
    string.char(phase, outcome, env.ip_family, env.has_sender and 1 or 0),
    u16le(env.rcpt_count), string.char(#env.rcpts, 0), mask, env.ip,
    lstring(env.sender), lstring(env.user),
  }
  for _, a in ipairs(env.rcpts) do
    table.insert(parts, lstring(a))
  end
  return table.concat(parts)
end

local function decode_envelope_reply(data, id)
  local ok, err = check_header(data, id, KIND_MESSAGE, RESULT_SIZE)
  if not ok then return nil, err end
  return decode_result(data, HEADER_SIZE + 1)
end

local function deciding_key(env, res)
  if res.index == NO_RECIPIENT then return env.user end
  return env.rcpts[res.index + 1] or '?'
end

-- What rspamd's ratelimit module does with a limited bucket (spec §3.13):
-- a symbol if configured, and a soft reject unless in symbol-only mode.
local function act_on_limit(task, env, res)
  local option = string.format('%s(%s)', res.family, deciding_key(env, res))
  local sym = settings.symbol or settings.info_symbol
  if sym then
    local weight = 1.0
    if settings.symbol_weight == 'tanh' then weight = res.score end
    task:insert_result(sym, weight, option)
  end
  rspamd_logger.infox(task, 'ratelimit "%s" exceeded (shingled): level %s of %s, accepts again in %s ms',
      option, string.format('%.4f', res.level), string.format('%.4f', res.capacity), res.wait_ms)
  if not settings.symbol then
    local text = settings.message or string.format('Ratelimit "%s" exceeded', res.family)
    task:set_pre_result('soft reject', text, N)
  end
end

local function on_decision(task, state, res)
  if res.store_full then
    rspamd_logger.infox(task, 'shingled: a bucket could not be stored (store full); not limited by it')
  end
  state.verdict = res.verdict
  if res.verdict == VERDICT_LIMIT then
    act_on_limit(task, state.env, res)
  elseif res.verdict == VERDICT_ACCEPT then
    state.mask = res.mask
    lua_util.debugm(N, task, 'accepted by shingled: %s buckets, fullest %s %s of %s',
        res.nbuckets, res.family, res.level, res.capacity)
  else
    lua_util.debugm(N, task, 'not limited by shingled: %s',
        res.verdict == VERDICT_WHITELISTED and 'whitelisted' or res.verdict)
  end
end

local function envelope_send(task, state, phase, outcome, mask, on_reply)
  local id = new_id()
  exchange(task, state.upstream, PHASE_NAMES[phase], id,
      encode_envelope(id, phase, outcome, mask, state.env), decode_envelope_reply, on_reply)
end

local function envelope_check(task)
  if not settings.allow_local and lua_util.is_rspamc_or_controller(task) then return end
  -- like rspamd: a message that already has a pre-result is not counted
  if task:has_pre_result() then return end
  local upstream = upstreams:get_upstream_master_slave()
  if not upstream then
    rspamd_logger.errx(task, 'no shingled server available; letting the message pass')
    return
  end
  local state = { env = task_envelope(task), upstream = upstream }
  task:cache_set(CACHE_KEY, state)
  local phase = settings.flow == 'one_shot' and PHASE_ONE_SHOT or PHASE_CHECK
  envelope_send(task, state, phase, OUTCOME_UNCERTAIN, ZERO_MASK, function(res)
    state.answered = true
    on_decision(task, state, res)
  end)
end

-- Two-phase flow, after the verdict: commit the reservations of a counted
-- message, release those of a message that will not be counted.
local function envelope_update(task)
  local state = task:cache_get(CACHE_KEY)
  -- nothing checked (local request, pre-result before the check), or the
  -- check failed: shingled holds nothing for this message
  if not state or not state.answered then return end
  if state.verdict ~= VERDICT_ACCEPT and state.verdict ~= VERDICT_LIMIT then return end
  if task:has_flag('skip') or task:has_pre_result() then
    -- limited here, greylisted, forced by another module...: not counted
    if state.mask and state.mask ~= ZERO_MASK then
      envelope_send(task, state, PHASE_RELEASE, OUTCOME_UNCERTAIN, state.mask)
    end
    return
  end
  -- Accepted, or limited in symbol-only mode (mask 0: counted as a message
  -- never checked, as rspamd counts it in that mode).
  envelope_send(task, state, PHASE_UPDATE, verdict_outcome(task), state.mask or ZERO_MASK)
end

---------------------------------------------------------------- configuration

local opts = rspamd_config:get_all_opt(N)
if not opts then
  return
end
settings = lua_util.override_defaults(settings, opts)
if type(settings.timeout) == 'string' then
  settings.timeout = lua_util.parse_time_interval(settings.timeout)
end
if type(settings.timeout) ~= 'number' or settings.timeout <= 0 then
  rspamd_logger.errx(rspamd_config, 'bad timeout %s; disabling %s', opts.timeout, N)
  lua_util.disable_module(N, 'config')
  return
end
settings.retransmits = tonumber(settings.retransmits) or 0
local function one_of(option, allowed)
  for _, v in ipairs(allowed) do
    if settings[option] == v then return true end
  end
  rspamd_logger.errx(rspamd_config, '%s must be one of %s, not %s; disabling %s',
      option, table.concat(allowed, ', '), settings[option], N)
  lua_util.disable_module(N, 'config')
  return false
end
if not one_of('flow', { 'two_phase', 'one_shot' }) or
    not one_of('symbol_weight', { 'fixed', 'tanh' }) or
    not one_of('rules', { 'rspamd', 'shingled' }) then
  return
end

upstreams = rspamd_upstream_list.create(rspamd_config, settings.servers, 11336)
if not upstreams then
  rspamd_logger.errx(rspamd_config, 'cannot parse servers %s; disabling %s', settings.servers, N)
  lua_util.disable_module(N, 'config')
  return
end

local use_rspamd_rules = settings.rules == 'rspamd'
local symbols = {}
local prefilter = true
if use_rspamd_rules then
  read_rspamd_section()
  prefilter = rl.prefilter
  symbols = { rl.symbol, rl.info_symbol }
  for _, rule in ipairs(rl.limits) do
    for _, b in ipairs(rule.buckets) do table.insert(symbols, b.symbol) end
  end
else
  symbols = { settings.symbol, settings.info_symbol }
end

local augmentation = string.format('timeout=%f', settings.timeout * (settings.retransmits + 1))
local id = rspamd_config:register_symbol({
  name = 'SHINGLED_RATELIMIT_CHECK',
  type = prefilter and 'prefilter' or 'callback',
  priority = lua_util.symbols_priorities.medium,
  flags = 'empty,nostat',
  callback = use_rspamd_rules and rules_check or envelope_check,
  augmentations = { augmentation },
})
local registered = {}
for _, sym in pairs(symbols) do
  if sym and not registered[sym] then
    registered[sym] = true
    rspamd_config:register_symbol({ name = sym, type = 'virtual', parent = id, score = 0.0 })
  end
end
if settings.flow == 'two_phase' then
  rspamd_config:register_symbol({
    name = 'SHINGLED_RATELIMIT_UPDATE',
    type = 'idempotent',
    flags = 'explicit_disable,ignore_passthrough',
    callback = use_rspamd_rules and rules_update or envelope_update,
    augmentations = { augmentation },
  })
end
if use_rspamd_rules then
  local names = {}
  for _, rule in ipairs(rl.limits) do table.insert(names, rule.name) end
  rspamd_logger.infox(rspamd_config, '%s: shingled at %s, %s flow, timeout %ss x %s sends, ' ..
      'rspamd\'s ratelimit rules: %s', N, settings.servers, settings.flow, settings.timeout,
      settings.retransmits + 1, #names > 0 and table.concat(names, ', ') or '(none)')
else
  rspamd_logger.infox(rspamd_config, '%s: shingled at %s, %s flow, timeout %ss x %s sends, ' ..
      'shingled\'s rules%s', N, settings.servers, settings.flow, settings.timeout,
      settings.retransmits + 1, settings.symbol and (', symbol-only mode: ' .. settings.symbol) or '')
end
