#!/usr/bin/perl
#
# check_meta.pl -- validate META.json, the PGXN distribution metadata, with
# core Perl only (JSON::PP), so CI needs no PGXN tool.
#
# Checks the fields and types of PGXN Meta Spec 1.0.0 (as its JSON schema,
# pgxn/meta schema/v1, states them): the required keys, SemVer versions,
# licenses, provides, prereqs, resources, tags, release_status; that the
# distribution version and the version of the extension it provides equal
# default_version of aion_wake.control ("1.0" read as "1.0.0"), as does
# the library's AW_VERSION (include/aion_wake.h); and that every file it
# names exists in the tree.
#
#   perl test/package/check_meta.pl [META.json]
#
# Prints one summary line, "check_meta: ok ..." or "check_meta: FAILED ..."
# after one line per problem, and exits non-zero on failure.
#
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use JSON::PP;

# a META.json named on the command line is read from where we were called;
# the files it names and the control file are in the tree's top directory
my $meta_file = @ARGV ? File::Spec->rel2abs(shift) : undef;
my $top = File::Spec->rel2abs(dirname(__FILE__) . '/../..');
chdir $top or die "check_meta: cannot chdir to $top: $!\n";
$meta_file //= 'META.json';
my $extension = 'aion_wake';
my $control_file = "$extension.control";

my @problems;
my @warnings;
my $example_uris = 0;    # URIs on reserved .example hosts: placeholders
sub problem { push @problems, join('', @_); }

my $semver = qr/^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)
	(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?
	(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/x;
my $range_one = qr/(?:(?:[=!]=|[<>]=?)\s*)?(?:(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\S*|0)/;
my $term = qr/^[^\/\\\s[:cntrl:]]{2,}$/;
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1
	artistic_2 bsd freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1
	lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl perl_5 postgresql qpl_1_0
	ssleay sun zlib open_source restricted unrestricted unknown);

# JSON types as decoded by JSON::PP: re-encode a lone value to see it
my $probe = JSON::PP->new->allow_nonref->canonical;
sub json_type
{
	my ($v) = @_;
	return 'null' unless defined $v;
	return 'object' if ref $v eq 'HASH';
	return 'array' if ref $v eq 'ARRAY';
	return 'boolean' if JSON::PP::is_bool($v);
	return $probe->encode($v) =~ /^"/ ? 'string' : 'number';
}

# a value for a message: its JSON text, with its type when not a string
sub show
{
	my ($v) = @_;
	my $t = json_type($v);
	return $probe->encode($v) if $t eq 'string' || $t eq 'null';
	return "$t " . $probe->encode($v);
}

sub is_string { json_type($_[0]) eq 'string' && length $_[0] >= ($_[1] // 1) }

sub check_keys
{
	my ($where, $h, $allowed) = @_;
	for my $k (sort keys %$h)
	{
		problem("$where: unknown key \"$k\" (custom keys start with x_)")
		  unless $allowed->{$k} || $k =~ /^[xX]_./;
	}
}

sub check_uri
{
	my ($where, $v) = @_;
	if (!is_string($v) || $v !~ m{^[A-Za-z][A-Za-z0-9+.-]*://[^\s/]+\S*$})
	{
		problem("$where: not a URI: ", show($v));
		return;
	}
	$example_uris++ if $v =~ m{^[a-z]+://[^/]*\.example(?:[:/]|$)}i;
}

# files named by META.json, checked at the end
my %files;
sub check_path
{
	my ($where, $v) = @_;
	if (!is_string($v, 2) || $v =~ m{^/} || $v =~ m{(?:^|/)\.\.(?:/|$)} || $v =~ /\\/)
	{
		problem("$where: not a relative path in the distribution: ", show($v));
		return;
	}
	$files{$v} = $where;
}

# the control file's default_version, as SemVer
my $extversion;
if (open my $fh, '<', $control_file)
{
	while (<$fh>)
	{
		$extversion = $1 if /^\s*default_version\s*=\s*'([^']*)'/;
	}
	close $fh;
	problem("$control_file: no default_version") unless defined $extversion;
}
else
{
	problem("$control_file: $!");
}
# the library's own version (its magic block on PostgreSQL 18 and later)
# must be the control file's: otherwise only an 18+ run notices
my $header_file = dirname($control_file) . '/include/aion_wake.h';
if (defined $extversion && open my $hh, '<', $header_file)
{
	my $libversion;
	while (<$hh>)
	{
		$libversion = $1 if /^#define\s+AW_VERSION\s+"([^"]*)"/;
	}
	close $hh;
	if (!defined $libversion)
	{
		problem("$header_file: no AW_VERSION");
	}
	elsif ($libversion ne $extversion)
	{
		problem("$header_file: AW_VERSION \"$libversion\", but $control_file has default_version '$extversion'");
	}
}
my $want_version;
if (defined $extversion)
{
	if ($extversion =~ /^(\d+)(?:\.(\d+))?(?:\.(\d+))?$/)
	{
		$want_version = join '.', map { 0 + ($_ // 0) } $1, $2, $3;
	}
	else
	{
		problem("$control_file: default_version '$extversion' is not MAJOR[.MINOR[.PATCH]]");
	}
}

my $meta;
if (open my $fh, '<:raw', $meta_file)
{
	local $/;
	my $text = <$fh>;
	close $fh;
	$meta = eval { JSON::PP->new->utf8->relaxed(0)->decode($text) };
	if (!defined $meta)
	{
		(my $why = $@) =~ s/ at \S+ line \d+\.\n?$//;
		problem("$meta_file: not valid JSON: $why");
	}
}
else
{
	problem("$meta_file: $!");
}

if (defined $meta && json_type($meta) ne 'object')
{
	problem("$meta_file: the top level is not an object");
	undef $meta;
}

my $pg;
if (defined $meta)
{
	my %top = map { $_ => 1 } qw(name version abstract maintainer license
		provides meta-spec description generated_by tags no_index prereqs
		release_status resources);
	check_keys($meta_file, $meta, \%top);
	for my $k (qw(name version abstract maintainer license provides meta-spec))
	{
		problem("$k: required, missing") unless exists $meta->{$k};
	}

	# meta-spec
	if (my $ms = $meta->{'meta-spec'})
	{
		if (json_type($ms) ne 'object')
		{
			problem("meta-spec: not an object");
		}
		else
		{
			check_keys('meta-spec', $ms, { version => 1, url => 1 });
			problem("meta-spec.version: must be 1.0.x, not ", show($ms->{version}))
			  unless is_string($ms->{version}) && $ms->{version} =~ /^1\.0\.\d+$/;
			problem("meta-spec.url: must be https://pgxn.org/meta/spec.txt")
			  if exists $ms->{url}
			  && !(is_string($ms->{url}) && $ms->{url} =~ m{^https?://pgxn\.org/meta/spec\.txt$});
		}
	}

	if (exists $meta->{name})
	{
		problem("name: not a term (2+ characters, no slash, backslash, space or control)")
		  unless is_string($meta->{name}) && $meta->{name} =~ $term;
		problem("name: \"$meta->{name}\", expected \"$extension\"")
		  if is_string($meta->{name}) && $meta->{name} ne $extension;
	}

	if (exists $meta->{version})
	{
		if (!is_string($meta->{version}) || $meta->{version} !~ $semver)
		{
			problem("version: not a SemVer string: ", show($meta->{version}));
		}
		elsif (defined $want_version && $meta->{version} ne $want_version)
		{
			problem("version: $meta->{version}, but $control_file has default_version '$extversion' ($want_version)");
		}
	}

	for my $k (qw(abstract description generated_by))
	{
		problem("$k: not a non-empty string")
		  if exists $meta->{$k} && !is_string($meta->{$k});
	}

	if (exists $meta->{maintainer})
	{
		my $m = $meta->{maintainer};
		my @m = json_type($m) eq 'array' ? @$m : ($m);
		problem("maintainer: a non-empty string or a non-empty array of them")
		  if !@m || grep { !is_string($_) } @m;
	}

	if (exists $meta->{license})
	{
		my $l = $meta->{license};
		my $t = json_type($l);
		if ($t eq 'object')
		{
			problem("license: an empty object") unless %$l;
			check_uri("license.$_", $l->{$_}) for sort keys %$l;
		}
		else
		{
			my @l = $t eq 'array' ? @$l : ($l);
			problem("license: none given") unless @l;
			for (@l)
			{
				if (!is_string($_) || !$licenses{$_})
				{
					problem("license: not a PGXN license name: ", show($_));
				}
				elsif ($_ eq 'unknown')
				{
					push @warnings, 'license is "unknown"';
				}
			}
		}
	}

	if (exists $meta->{provides})
	{
		my $p = $meta->{provides};
		if (json_type($p) ne 'object' || !%$p)
		{
			problem("provides: not a non-empty object");
		}
		else
		{
			problem("provides: does not name the extension \"$extension\"")
			  unless exists $p->{$extension};
			for my $ext (sort keys %$p)
			{
				my $e = $p->{$ext};
				problem("provides: \"$ext\" is not a term") unless $ext =~ $term;
				if (json_type($e) ne 'object')
				{
					problem("provides.$ext: not an object");
					next;
				}
				check_keys("provides.$ext", $e,
					{ file => 1, version => 1, abstract => 1, docfile => 1, docpath => 1 });
				for my $k (qw(file version))
				{
					problem("provides.$ext.$k: required, missing") unless exists $e->{$k};
				}
				check_path("provides.$ext.file", $e->{file}) if exists $e->{file};
				check_path("provides.$ext.docfile", $e->{docfile}) if exists $e->{docfile};
				problem("provides.$ext.abstract: not a non-empty string")
				  if exists $e->{abstract} && !is_string($e->{abstract});
				problem("provides.$ext.docpath: not a non-empty string")
				  if exists $e->{docpath} && !is_string($e->{docpath});
				if (exists $e->{version})
				{
					if (!is_string($e->{version}) || $e->{version} !~ $semver)
					{
						problem("provides.$ext.version: not a SemVer string: ", show($e->{version}));
					}
					elsif ($ext eq $extension && defined $want_version && $e->{version} ne $want_version)
					{
						problem("provides.$ext.version: $e->{version}, but $control_file has default_version '$extversion' ($want_version)");
					}
				}
			}
		}
	}

	if (exists $meta->{prereqs})
	{
		my $pr = $meta->{prereqs};
		if (json_type($pr) ne 'object' || !%$pr)
		{
			problem("prereqs: not a non-empty object");
		}
		else
		{
			check_keys('prereqs', $pr, { map { $_ => 1 } qw(configure build test runtime develop) });
			for my $phase (grep { !/^[xX]_/ } sort keys %$pr)
			{
				my $ph = $pr->{$phase};
				if (json_type($ph) ne 'object' || !%$ph)
				{
					problem("prereqs.$phase: not a non-empty object");
					next;
				}
				check_keys("prereqs.$phase", $ph, { map { $_ => 1 } qw(requires recommends suggests conflicts) });
				for my $rel (grep { !/^[xX]_/ } sort keys %$ph)
				{
					my $r = $ph->{$rel};
					if (json_type($r) ne 'object' || !%$r)
					{
						problem("prereqs.$phase.$rel: not a non-empty object");
						next;
					}
					for my $name (sort keys %$r)
					{
						my $v = $r->{$name};
						problem("prereqs.$phase.$rel: \"$name\" is not a term") unless $name =~ $term;
						problem("prereqs.$phase.$rel.$name: not a version range: ", show($v))
						  unless (json_type($v) eq 'number' && $v == 0)
						  || (is_string($v) && $v =~ /^$range_one(?:,\s*$range_one)*$/);
					}
				}
			}
		}
	}
	$pg = eval { $meta->{prereqs}{runtime}{requires}{PostgreSQL} };
	if (!defined $pg)
	{
		problem("prereqs.runtime.requires.PostgreSQL: missing");
	}
	elsif (!is_string($pg) || $pg !~ /^(?:>=\s*)?15\.0\.0$/)
	{
		problem("prereqs.runtime.requires.PostgreSQL: ", show($pg),
			", expected \"15.0.0\" (>= 15, what aion_wake is built and tested on)");
	}

	if (exists $meta->{resources})
	{
		my $r = $meta->{resources};
		if (json_type($r) ne 'object' || !%$r)
		{
			problem("resources: not a non-empty object");
		}
		else
		{
			check_keys('resources', $r, { homepage => 1, bugtracker => 1, repository => 1 });
			check_uri('resources.homepage', $r->{homepage}) if exists $r->{homepage};
			if (exists $r->{bugtracker})
			{
				my $b = $r->{bugtracker};
				if (json_type($b) ne 'object' || !(exists $b->{web} || exists $b->{mailto}))
				{
					problem("resources.bugtracker: an object with web or mailto");
				}
				else
				{
					check_keys('resources.bugtracker', $b, { web => 1, mailto => 1 });
					check_uri('resources.bugtracker.web', $b->{web}) if exists $b->{web};
					problem("resources.bugtracker.mailto: not an e-mail address")
					  if exists $b->{mailto} && !(is_string($b->{mailto}) && $b->{mailto} =~ /^[^@\s]+@[^@\s]+$/);
				}
			}
			if (exists $r->{repository})
			{
				my $g = $r->{repository};
				if (json_type($g) ne 'object'
					|| !((exists $g->{url} && exists $g->{type}) || exists $g->{web}))
				{
					problem("resources.repository: an object with url and type, or web");
				}
				else
				{
					check_keys('resources.repository', $g, { url => 1, web => 1, type => 1 });
					check_uri('resources.repository.url', $g->{url}) if exists $g->{url};
					check_uri('resources.repository.web', $g->{web}) if exists $g->{web};
					problem("resources.repository.type: lower-case letters, e.g. \"git\"")
					  if exists $g->{type} && !(is_string($g->{type}) && $g->{type} =~ /^[a-z]+$/);
				}
			}
		}
	}

	if (exists $meta->{tags})
	{
		my $t = $meta->{tags};
		if (json_type($t) ne 'array' || !@$t)
		{
			problem("tags: not a non-empty array");
		}
		else
		{
			my %seen;
			for (@$t)
			{
				problem("tags: not a tag (2-255 characters, no slash, backslash or control): ", show($_))
				  unless is_string($_, 2) && length $_ <= 255 && /^[^\/\\[:cntrl:]]{2,}$/;
				problem("tags: \"$_\" twice") if is_string($_) && $seen{$_}++;
			}
		}
	}

	problem("release_status: stable, testing or unstable, not ", show($meta->{release_status}))
	  if exists $meta->{release_status}
	  && !(is_string($meta->{release_status}) && $meta->{release_status} =~ /^(?:stable|testing|unstable)$/);

	if (exists $meta->{no_index})
	{
		my $n = $meta->{no_index};
		if (json_type($n) ne 'object' || !(exists $n->{file} || exists $n->{directory}))
		{
			problem("no_index: an object with file or directory");
		}
		else
		{
			check_keys('no_index', $n, { file => 1, directory => 1 });
			for my $k (grep { exists $n->{$_} } qw(file directory))
			{
				my @p = json_type($n->{$k}) eq 'array' ? @{ $n->{$k} } : ($n->{$k});
				check_path("no_index.$k", $_) for @p;
			}
		}
	}
}

push @warnings, "$example_uris URI" . ($example_uris == 1 ? '' : 's') . " on .example hosts"
  if $example_uris;

for my $f (sort keys %files)
{
	problem("$files{$f}: $f does not exist") unless -e $f;
}

if (@problems)
{
	print "  $_\n" for @problems;
	printf "check_meta: FAILED %s: %d problem%s\n", $meta_file, scalar @problems, @problems == 1 ? '' : 's';
	exit 1;
}
printf "check_meta: ok %s: %s %s = %s default_version '%s', PostgreSQL %s, %d named file%s exist%s%s\n",
  $meta_file, $meta->{name}, $meta->{version}, $control_file, $extversion, $pg,
  scalar keys %files, keys %files == 1 ? '' : 's', keys %files == 1 ? 's' : '',
  @warnings ? ' (warning: ' . join('; ', @warnings) . ')' : '';
exit 0;
