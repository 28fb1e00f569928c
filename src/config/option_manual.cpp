// shingled.conf(5) from the option table (see option_manual.h).
#include "config/option_manual.h"

#include "config/option_table.h"

namespace shingled {

namespace {

// Text as roff body text: backslashes doubled, hyphens that must stay
// hyphens escaped, and a leading dot or quote kept from being a request.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

const char kHead[] = R"(.TH SHINGLED.CONF 5 "" "shingled" "File formats"
.SH NAME
shingled.conf \- configuration of the shingled daemon
.SH SYNOPSIS
.B /etc/shingled/shingled.conf
.SH DESCRIPTION
.B shingled
reads one configuration file (\fB\-\-config\fR, by default none: the
embedded defaults) in rspamd's UCL syntax: \fIname\fR \fB=\fR \fIvalue\fR\fB;\fR
lines, \fB#\fR comments, strings in double quotes, lists in \fB[ ]\fR and
blocks in \fB{ }\fR. A fuzzy storage worker block from rspamd's
\fIworker-fuzzy.inc\fR may be pasted in as it is: options shingled does
not implement are named in a warning or, where they would change answers,
refused. Any other mistake (an unknown option, a value out of range, a
word where a number belongs, an option given twice) stops the daemon at
start with the file, the line and the reason; \fBshingled \-\-check\-config\fR
checks a file and prints every option's resolved value.
.PP
Durations take the units \fBs\fR, \fBmin\fR, \fBh\fR, \fBd\fR and \fBw\fR
(no unit: seconds); counts \fBk\fR, \fBm\fR and \fBg\fR (thousands,
millions, billions); sizes \fBkb\fR, \fBmb\fR and \fBgb\fR. Address lists
take IPv4 and IPv6 addresses and CIDR networks, inline or as map files
(\fBfile:///path\fR), which are re\-read when they change and on SIGHUP.
.SH OPTIONS
The options, in the order \fBshingled \-\-help\-config\fR lists them, each
with its type, range and default.
)";

const char kTail[] = R"(.SH FILES
.TP
.I /etc/shingled/shingled.conf
the configuration (the Debian package installs a commented one equal to
the embedded defaults)
.TP
.I /var/lib/shingled
the database (an LMDB environment) under the systemd unit
.SH SEE ALSO
.BR shingled (8),
.BR shinglectl (8),
.BR shingle\-load (1);
the README and docs/ of the source tree for the design and the protocols.
)";

}  // namespace

std::string render_config_manual() {
  std::string out = kHead;
  for (const OptionRow& row : option_table()) {
    out += ".TP\n.B " + roff(row.name) + "\n";
    std::string also;
    for (const char* alias : row.aliases) {
      if (alias != nullptr) also += std::string(also.empty() ? "" : ", ") + alias;
    }
    std::string meta = kind_name(row.kind);
    if (row.repeatable) meta += ", repeatable";
    const std::string range = shown_range(row);
    if (!range.empty()) meta += "; " + range;
    meta += "; default " + shown_default(row);
    if (!also.empty()) meta += "; also spelled " + also;
    out += "(" + roff(meta) + ")\n.br\n" + roff(row.help) + "\n";
  }
  return out + kTail;
}

}  // namespace shingled
