--[[
shingled_ratelimit: rspamd's ratelimit decisions from shingled over UDP
instead of Redis. The plugin only sends the envelope (client IP, sender,
authenticated user, recipients) and the phase; shingled forms the buckets
from its own `ratelimit { rates { } }`, whitelists and bounce rules, and
answers with a verdict. The wire protocol is docs/ratelimit.md; install
steps and options are contrib/rspamd/README.md.

Never blocks a message because shingled is unreachable or answers nonsense:
like rspamd's own module with Redis down, it logs and lets the mail pass.
Works on rspamd 3.4 (LuaJIT, no string.pack): bytes are built by hand.
]]--

if confighelp then
  return
end

local N = 'shingled_ratelimit'
local rspamd_logger = require "rspamd_logger"
local rspamd_udp = require "rspamd_udp"
local rspamd_text = require "rspamd_text"
local rspamd_upstream_list = require "rspamd_upstream_list"
local lua_util = require "lua_util"
local lua_verdict = require "lua_verdict"

local settings = {
  servers = '127.0.0.1:11336',
  timeout = 1.0,          -- seconds per attempt
  retransmits = 2,        -- extra sends of the identical datagram on timeout
  flow = 'two_phase',     -- or 'one_shot'
  symbol = nil,           -- symbol-only mode: insert it, never soft reject
  info_symbol = nil,      -- insert it and soft reject
  symbol_weight = 'fixed', -- 'fixed' (1.0, rspamd >= 2.0) or 'tanh' (the reply's score)
  message = nil,          -- soft reject text instead of 'Ratelimit "<family>" exceeded'
  allow_local = false,    -- also limit requests from rspamc / the controller
}

-- Protocol constants (docs/ratelimit.md, include/shingled/ratelimit_wire.h).
local MAGIC = 'shrl'
local VERSION, KIND_MESSAGE = 1, 1
local PHASE_ONE_SHOT, PHASE_CHECK, PHASE_UPDATE, PHASE_RELEASE = 1, 2, 3, 4
local OUTCOME_UNCERTAIN, OUTCOME_HAM, OUTCOME_SPAM = 0, 1, 2
local VERDICT_ACCEPT, VERDICT_LIMIT, VERDICT_WHITELISTED, VERDICT_TOO_MANY = 0, 1, 2, 3
local HEADER_SIZE, RESULT_SIZE = 16, 32
local MAX_LISTED_RCPTS, MAX_STRING, MAX_REQUEST = 32, 255, 8192
local ZERO_MASK = string.rep('\0', 8)
local FAMILIES = { 'to', 'to_ip', 'to_ip_from', 'bounce_to', 'bounce_to_ip', 'user' }
local NO_RECIPIENT = 255
local PHASE_NAMES = { 'one-shot', 'check', 'update', 'release' }
local CACHE_KEY = 'shingled_ratelimit'

local upstreams

---------------------------------------------------------------- encoding

local function u16le(v)
  return string.char(v % 256, math.floor(v / 256) % 256)
end

local function u32_at(s, i)  -- i is 1-based
  local b1, b2, b3, b4 = s:byte(i, i + 3)
  return ((b4 * 256 + b3) * 256 + b2) * 256 + b1
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

local function lstring(s)
  return string.char(#s) .. s
end

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
  local from = task:get_from(0)
  if from and from[1] and from[1].addr then
    local addr = from[1].addr
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
  -- datagram holds at most 32 and at most 8192 bytes in all.
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

local function encode_request(id, phase, outcome, mask, env)
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

-- The reply to a one-message request, or nil and why it is unusable.
local function decode_reply(data, id)
  data = tostring(data)
  if #data < HEADER_SIZE then return nil, 'short reply (' .. #data .. ' bytes)' end
  if data:sub(1, 4) ~= MAGIC then return nil, 'bad magic' end
  local version, kind, n, status = data:byte(5, 8)
  if version ~= VERSION or kind ~= KIND_MESSAGE or n ~= 1 then
    return nil, string.format('unexpected header (version %d, kind %d, n %d)', version, kind, n)
  end
  if data:sub(9, 16) ~= id then return nil, 'reply to another request id' end
  if status == 1 then return nil, 'refused by the server (not allowed to update)' end
  if status ~= 0 then return nil, 'unknown status ' .. status end
  if #data ~= HEADER_SIZE + RESULT_SIZE then return nil, 'reply of ' .. #data .. ' bytes' end
  local r = HEADER_SIZE + 1
  local verdict, flags, family, rcpt = data:byte(r, r + 3)
  return {
    verdict = verdict,
    store_full = flags % 2 == 1,
    family = FAMILIES[family] or 'unknown',
    rcpt_index = rcpt,
    wait_ms = u32_at(data, r + 4),
    mask = data:sub(r + 8, r + 15),  -- kept as bytes: echoed, never computed on
    level = f32_at(data, r + 16),
    capacity = f32_at(data, r + 20),
    score = f32_at(data, r + 24),
    nbuckets = data:byte(r + 28),
  }
end

---------------------------------------------------------------- exchange

-- Sends one message request and calls on_reply(result) with the decoded
-- reply, or nothing on a failure (logged: the mail passes).
local function exchange(task, state, phase, outcome, mask, on_reply)
  local id = tostring(rspamd_text.randombytes(8))
  local data = encode_request(id, phase, outcome, mask, state.env)
  local upstream = state.upstream
  local addr = upstream:get_addr()
  local where = string.format('%s:%s', tostring(addr), addr:get_port())
  local function callback(ok, reply)
    if not ok then
      upstream:fail()
      rspamd_logger.errx(task, 'shingled %s at %s: %s; letting the message pass',
          PHASE_NAMES[phase], where, reply)
      return
    end
    local res, err = decode_reply(reply, id)
    if not res then
      rspamd_logger.errx(task, 'shingled %s at %s: %s; letting the message pass',
          PHASE_NAMES[phase], where, err)
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
    rspamd_logger.errx(task, 'cannot send to shingled at %s: %s; letting the message pass',
        where, err)
  end
end

---------------------------------------------------------------- actions

local function deciding_key(env, res)
  if res.rcpt_index == NO_RECIPIENT then return env.user end
  return env.rcpts[res.rcpt_index + 1] or '?'
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
        res.verdict == VERDICT_WHITELISTED and 'whitelisted' or
        res.verdict == VERDICT_TOO_MANY and 'too many recipients' or res.verdict)
  end
end

---------------------------------------------------------------- callbacks

local function ratelimit_check(task)
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
  exchange(task, state, phase, OUTCOME_UNCERTAIN, ZERO_MASK, function(res)
    state.answered = true
    on_decision(task, state, res)
  end)
end

local function verdict_outcome(task)
  local verdict = lua_verdict.get_specific_verdict('ratelimit', task)
  if verdict == 'spam' or verdict == 'junk' then return OUTCOME_SPAM end
  if verdict == 'ham' then return OUTCOME_HAM end
  return OUTCOME_UNCERTAIN
end

-- Two-phase flow, after the verdict: commit the reservations of a counted
-- message, release those of a message that will not be counted.
local function ratelimit_update(task)
  local state = task:cache_get(CACHE_KEY)
  -- nothing checked (local request, pre-result before the check), or the
  -- check failed: shingled holds nothing for this message
  if not state or not state.answered then return end
  if state.verdict == VERDICT_WHITELISTED or state.verdict == VERDICT_TOO_MANY then return end
  if task:has_flag('skip') or task:has_pre_result() then
    -- limited here, greylisted, forced by another module...: not counted
    if state.mask and state.mask ~= ZERO_MASK then
      exchange(task, state, PHASE_RELEASE, OUTCOME_UNCERTAIN, state.mask)
    end
    return
  end
  -- Accepted, or limited in symbol-only mode (mask 0: counted as a message
  -- never checked, as rspamd counts it in that mode).
  exchange(task, state, PHASE_UPDATE, verdict_outcome(task), state.mask or ZERO_MASK)
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
    not one_of('symbol_weight', { 'fixed', 'tanh' }) then
  return
end

upstreams = rspamd_upstream_list.create(rspamd_config, settings.servers, 11336)
if not upstreams then
  rspamd_logger.errx(rspamd_config, 'cannot parse servers %s; disabling %s', settings.servers, N)
  lua_util.disable_module(N, 'config')
  return
end

local id = rspamd_config:register_symbol({
  name = 'SHINGLED_RATELIMIT_CHECK',
  type = 'prefilter',
  priority = lua_util.symbols_priorities.medium,
  flags = 'empty,nostat',
  callback = ratelimit_check,
  augmentations = { string.format('timeout=%f', settings.timeout * (settings.retransmits + 1)) },
})
for _, sym in ipairs({ settings.symbol, settings.info_symbol }) do
  if sym then
    rspamd_config:register_symbol({ name = sym, type = 'virtual', parent = id, score = 0.0 })
  end
end
if settings.flow == 'two_phase' then
  rspamd_config:register_symbol({
    name = 'SHINGLED_RATELIMIT_UPDATE',
    type = 'idempotent',
    flags = 'explicit_disable,ignore_passthrough',
    callback = ratelimit_update,
    augmentations = { string.format('timeout=%f', settings.timeout * (settings.retransmits + 1)) },
  })
end
rspamd_logger.infox(rspamd_config, '%s: shingled at %s, %s flow, timeout %ss x %s sends%s',
    N, settings.servers, settings.flow, settings.timeout, settings.retransmits + 1,
    settings.symbol and (', symbol-only mode: ' .. settings.symbol) or '')
