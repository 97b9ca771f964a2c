# bench/ncu_kernel_table.awk: where a program's GPU time goes, from Nsight Compute's CSV of one
# metric, gpu__time_duration.sum, per kernel launch (bench/gpu_check.sh runs
#   ncu --metrics gpu__time_duration.sum --csv --print-kernel-base function --log-file F ...
# over one training step). Sums the durations by kernel name and prints the TOP (default 12)
# names by total time, then one line for the rest and the total:
#   share %   total ms   launches   mean us   kernel
# With -v summary=1 it prints one line instead: "N launches, X ms; NAME P%, NAME P%, NAME P%".
#
# The CSV's columns are found by their header ("Kernel Name", "Metric Name", "Metric Unit",
# "Metric Value"), not by position; lines before the header (the program's output, ncu's
# ==PROF== lines) are skipped. Every field is quoted; a value may carry thousands separators
# ("1,234,567"); the unit is any of ncu's time units (nsecond, usecond, msecond, second, or ns,
# us, ms, s). A CSV with no such header, or no duration rows, prints one line saying so and
# exits 1.
#   usage: awk -f bench/ncu_kernel_table.awk [-v top=N] [-v summary=1] ncu.csv
BEGIN { if (top == "") top = 12; header = 0 }

# A line of quoted fields "a","b",... -> f[1..n]; returns n (0 for a line that is not one).
function split_quoted(line, f,    n, i, parts) {
    if (line !~ /^".*"\r?$/) return 0
    sub(/\r$/, "", line)
    line = substr(line, 2, length(line) - 2)
    n = split(line, parts, /","/)
    for (i = 1; i <= n; i++) f[i] = parts[i]
    return n
}

function ns_per(unit) {
    if (unit == "nsecond" || unit == "ns") return 1
    if (unit == "usecond" || unit == "us") return 1e3
    if (unit == "msecond" || unit == "ms") return 1e6
    if (unit == "second" || unit == "s") return 1e9
    return 0
}

{
    n = split_quoted($0, f)
    if (n == 0) next
    if (!header) {
        for (i = 1; i <= n; i++) col[f[i]] = i
        if (("Kernel Name" in col) && ("Metric Name" in col) && ("Metric Value" in col) && ("Metric Unit" in col))
            header = 1
        else
            delete col
        next
    }
    if (f[col["Metric Name"]] != "gpu__time_duration.sum") next
    scale = ns_per(f[col["Metric Unit"]])
    value = f[col["Metric Value"]]
    gsub(/,/, "", value)
    if (scale == 0 || value !~ /^[0-9.eE+-]+$/) { bad++; next }
    name = f[col["Kernel Name"]]
    if (!(name in total)) names[++kinds] = name
    total[name] += value * scale
    calls[name]++
    all += value * scale
    launches++
}

END {
    if (!header) { print "no Nsight Compute CSV header (\"Kernel Name\", \"Metric Value\") in the input"; exit 1 }
    if (launches == 0) { print "no gpu__time_duration.sum rows in the input"; exit 1 }
    # order the names by total time, largest first (insertion sort: a step has tens of names)
    for (i = 2; i <= kinds; i++) {
        k = names[i]
        for (j = i - 1; j >= 1 && total[names[j]] < total[k]; j--) names[j + 1] = names[j]
        names[j + 1] = k
    }
    if (summary) {
        line = sprintf("%d launches, %.2f ms", launches, all / 1e6)
        for (i = 1; i <= kinds && i <= 3; i++)
            line = line sprintf("%s %s %.0f%%", i == 1 ? ";" : ",", names[i], 100 * total[names[i]] / all)
        print line
        exit 0
    }
    printf "%7s %10s %9s %10s  %s\n", "share", "total ms", "launches", "mean us", "kernel"
    rest = all
    rest_calls = launches
    for (i = 1; i <= kinds && i <= top; i++) {
        k = names[i]
        printf "%6.1f%% %10.3f %9d %10.1f  %s\n", 100 * total[k] / all, total[k] / 1e6, calls[k],
               total[k] / calls[k] / 1e3, k
        rest -= total[k]
        rest_calls -= calls[k]
    }
    if (kinds > top)
        printf "%6.1f%% %10.3f %9d %10s  (%d other kernels)\n", 100 * rest / all, rest / 1e6, rest_calls, "",
               kinds - top
    printf "%6.1f%% %10.3f %9d %10s  all kernels%s\n", 100, all / 1e6, launches, "",
           bad ? sprintf(" (%d rows with an unknown unit or value skipped)", bad) : ""
}
