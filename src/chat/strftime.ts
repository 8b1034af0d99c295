/**
 * `strftime` in the C locale, local time, as llama.cpp's `strftime_now` (C++
 * `std::put_time` on `std::localtime`) prints it: what chat templates call to
 * print today's date (`strftime_now("%d %b %Y")` → `"02 Dec 2026"`).
 *
 * @example
 * ```ts
 * import { strftime } from "./strftime.ts";
 * const date = new Date(2026, 11, 2, 9, 5);
 * if (strftime(date, "%d %b %Y, %B %-d %H:%M") !== "02 Dec 2026, December 2 09:05") {
 *   throw new Error("strftime");
 * }
 * ```
 *
 * @module
 */

const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

function pad(n: number, width = 2, fill = "0"): string {
  return String(n).padStart(width, fill);
}

function dayOfYear(date: Date): number {
  const start = new Date(date.getFullYear(), 0, 1);
  const ms = date.getTime() - start.getTime() +
    (start.getTimezoneOffset() - date.getTimezoneOffset()) * 60_000;
  return Math.floor(ms / 86_400_000) + 1;
}

/**
 * Formats `date` (local time) with the C-locale `strftime` conversions
 * `%a %A %b %h %B %c %d %e %D %F %H %I %j %m %M %n %p %r %R %S %t %T %u %w
 * %x %X %y %Y %Z %z %%`, plus glibc's `%-d`-style "no padding" flag. An
 * unknown conversion is copied as is.
 */
export function strftime(date: Date, format: string): string {
  return format.replace(/%(-?)([a-zA-Z%])/g, (whole, flag: string, c: string) => {
    const num = (n: number, width = 2) => (flag === "-" ? String(n) : pad(n, width));
    const h = date.getHours();
    switch (c) {
      case "a":
        return DAYS[date.getDay()].slice(0, 3);
      case "A":
        return DAYS[date.getDay()];
      case "b":
      case "h":
        return MONTHS[date.getMonth()].slice(0, 3);
      case "B":
        return MONTHS[date.getMonth()];
      case "c":
        return strftime(date, "%a %b %e %H:%M:%S %Y");
      case "d":
        return num(date.getDate());
      case "e":
        return flag === "-" ? String(date.getDate()) : pad(date.getDate(), 2, " ");
      case "D":
      case "x":
        return strftime(date, "%m/%d/%y");
      case "F":
        return strftime(date, "%Y-%m-%d");
      case "H":
        return num(h);
      case "I":
        return num(h % 12 === 0 ? 12 : h % 12);
      case "j":
        return num(dayOfYear(date), 3);
      case "m":
        return num(date.getMonth() + 1);
      case "M":
        return num(date.getMinutes());
      case "n":
        return "\n";
      case "p":
        return h < 12 ? "AM" : "PM";
      case "r":
        return strftime(date, "%I:%M:%S %p");
      case "R":
        return strftime(date, "%H:%M");
      case "S":
        return num(date.getSeconds());
      case "t":
        return "\t";
      case "T":
      case "X":
        return strftime(date, "%H:%M:%S");
      case "u":
        return String(date.getDay() === 0 ? 7 : date.getDay());
      case "w":
        return String(date.getDay());
      case "y":
        return num(date.getFullYear() % 100);
      case "Y":
        return String(date.getFullYear());
      case "z": {
        const offset = -date.getTimezoneOffset();
        const sign = offset < 0 ? "-" : "+";
        return sign + pad(Math.floor(Math.abs(offset) / 60)) + pad(Math.abs(offset) % 60);
      }
      case "Z":
        return date.getTimezoneOffset() === 0 ? "UTC" : "";
      case "%":
        return "%";
      default:
        return whole;
    }
  });
}
